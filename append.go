package inbox

import "context"

// The rules of a message added to a live thread (send --thread, reply,
// ack): where it goes, and when it is refused.

// Append is a message being added to a thread, as PrepareAppend checked
// it: its sender, its address and, for a list or a team, the agents it
// names. Check (optional) runs on the thread's current state before
// anything is decided; AllowTerminal lets the message into a thread that
// has ended (an acknowledgment changes no status).
type Append struct {
	From          string
	Addr          Address
	Recipients    []string
	Check         func(t *Thread) error
	AllowTerminal bool
}

// PrepareAppend checks the thread id of a message from from added to
// thread tid and resolves its address to (ResolveTo).
func PrepareAppend(ctx context.Context, d Directory, tid, from, to string) (*Append, error) {
	if err := ValidateID("thread", tid); err != nil {
		return nil, err
	}
	addr, recipients, err := ResolveTo(ctx, d, from, to)
	if err != nil {
		return nil, err
	}
	return &Append{From: from, Addr: addr, Recipients: recipients}, nil
}

// CheckSaysSomething refuses a message with no summary, body, artifact or
// payload.
func CheckSaysSomething(m *Message) error {
	if m.Summary == "" && len(m.Artifacts) == 0 && string(m.PayloadJSON) == "{}" {
		return Invalid("summary", "or {body} is required: a message must say something")
	}
	return nil
}

// AddTo decides, on thread t's current state, whether message m may be
// added, and fills in its recipients: the thread's other party when it
// names none (OtherParty), the agents of a list or a team.
func (a *Append) AddTo(t *Thread, m *Message) error {
	if a.Check != nil {
		if err := a.Check(t); err != nil {
			return err
		}
	}
	if IsTerminal(t.Status) && !a.AllowTerminal {
		return InvalidState("thread %s is %s; a terminal thread takes no more messages (start a new thread)", t.ThreadID, t.Status)
	}
	switch {
	case m.ToAgent == "":
		m.ToAgent, m.Recipients = OtherParty(t, a.From)
	case !a.Addr.Single():
		m.Recipients = a.Recipients
	}
	return nil
}

// AddressNew addresses the first message m of a new thread sent to addr,
// which names recipients, and returns who the thread is assigned to: the
// one agent an address for one names; nobody (offered to every recipient
// until one claims it) for a list, a team or all.
func AddressNew(m *Message, addr Address, recipients []string) (assignee string) {
	m.ToAgent = addr.Given
	if len(recipients) == 1 && addr.Single() {
		return recipients[0]
	}
	m.Recipients = recipients
	return ""
}
