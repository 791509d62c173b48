package inbox

import "context"

// The rules of a message added to a live thread (send --thread, reply,
// ack): where it goes, and when it is refused.

// PrepareAppend checks the thread id of a message added to a thread and
// resolves its address (ResolveTo): the address as given and, for a list
// or a team, the agents it names.
func PrepareAppend(ctx context.Context, d Directory, tid, from, to string) (Address, []string, error) {
	if err := ValidateID("thread", tid); err != nil {
		return Address{}, nil, err
	}
	return ResolveTo(ctx, d, from, to)
}

// CheckSaysSomething refuses a message with no summary, body, artifact or
// payload.
func CheckSaysSomething(m *Message) error {
	if m.Summary == "" && len(m.Artifacts) == 0 && string(m.PayloadJSON) == "{}" {
		return Invalid("summary", "or {body} is required: a message must say something")
	}
	return nil
}

// AddTo decides, on the thread's current state, whether message m (from
// from, to the address addr naming recipients) may be added to thread t,
// and fills in its recipients: the thread's other party when it names
// none (OtherParty), the agents of a list or team. A thread that has
// ended takes no more messages unless allowTerminal (an acknowledgment
// changes no status).
func AddTo(t *Thread, m *Message, from string, addr Address, recipients []string, allowTerminal bool) error {
	if IsTerminal(t.Status) && !allowTerminal {
		return InvalidState("thread %s is %s; a terminal thread takes no more messages (start a new thread)", t.ThreadID, t.Status)
	}
	switch {
	case m.ToAgent == "":
		m.ToAgent, m.Recipients = OtherParty(t, from)
	case !addr.Single():
		m.Recipients = recipients
	}
	return nil
}
