package inbox

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// The rules every backend applies to a change before it is made.

// PrepareSend checks what every send needs and fills in defaults.
//
// The default kind says whether a new thread is work: a send with a
// subject starts a task (it shows in the recipient's fetch); one without,
// a note to an agent's mailbox ("Phase 1 complete"), is mail of kind
// progress, which starts no work (SPEC 7).
func PrepareSend(in *SendInput) error {
	if err := ValidateAgent("from", in.From); err != nil {
		return err
	}
	if in.Kind == "" {
		in.Kind = KindForType(in.Type)
	}
	if in.Kind == "" {
		in.Kind = KindTask
		if in.ThreadID == "" && strings.TrimSpace(in.Subject) == "" {
			in.Kind = KindProgress
		}
	}
	if err := ValidateKind("kind", in.Kind, Kinds); err != nil {
		return err
	}
	if in.ThreadID != "" {
		if err := ValidateText("subject", in.Subject, MaxSubjectLen); err != nil {
			return err
		}
		if strings.TrimSpace(in.Summary) == "" {
			// The subject of a new thread says what a message is about:
			// in a thread it is the message's summary (the thread keeps
			// its own subject).
			in.Summary = strings.TrimSpace(in.Subject)
		}
	}
	return nil
}

// SameAsThread checks the flags that describe a new thread against the
// thread a send appends to: run, task and priority must be the thread's
// own (they cannot be changed by a message); the subject becomes the
// message's summary.
func SameAsThread(h *Thread, in SendInput) error {
	for _, f := range []struct{ name, given, has string }{{"run", in.RunID, h.RunID}, {"task", in.TaskID, h.TaskID}, {"priority", in.Priority, h.Priority}} {
		if f.given != "" && f.given != f.has {
			return Invalid(f.name, "%q differs from thread %s's %s %q: a message cannot change it (leave {%s} out, or start a new thread)",
				f.given, h.ThreadID, f.name, orNone(f.has), f.name)
		}
	}
	return nil
}

// OtherParty is the default recipient of a message from `from` in a
// thread: the creator for its assignee, else the assignee; while a thread
// sent to several agents is assigned to none, the creator for any of them
// and all of them for anyone else.
func OtherParty(h *Thread, from string) (to string, recipients []string) {
	switch {
	case h.AssignedTo != "" && from == h.AssignedTo:
		return h.CreatedBy, nil
	case h.AssignedTo == "" && len(h.Recipients) > 0:
		if slices.Contains(h.Recipients, from) {
			return h.CreatedBy, nil
		}
		return strings.Join(h.Recipients, ","), h.Recipients
	}
	return h.AssignedTo, nil
}

// CheckLeaseArgs checks the arguments of a claim or renewal.
func CheckLeaseArgs(agent, tid string, secs int) error {
	if err := CheckAgentThread(agent, tid); err != nil {
		return err
	}
	if secs <= 0 || secs > MaxLeaseSecs {
		return Invalid("lease_seconds", "%d is out of range: give 1 to %d", secs, MaxLeaseSecs)
	}
	return nil
}

func CheckAgentThread(agent, tid string) error {
	if err := ValidateAgent("agent", agent); err != nil {
		return err
	}
	return ValidateID("thread", tid)
}

// CheckHolder enforces the lease for holder commands: agent must hold the
// live lease and, when token is non-zero, it must be the current token.
//
// A lease that ran out counts as expired whether or not the daemon has
// released it yet (a thread it released is pending again): its holder and
// a stale token get 20 either way, never 30.
func CheckHolder(h *Thread, l *Lease, agent string, token int64, now time.Time) error {
	if l == nil || l.AgentID == "" {
		return InvalidState("thread %s is %s and nobody holds its lease; claim it first", h.ThreadID, h.Status)
	}
	live := l.Live(now)
	switch {
	case l.AgentID != agent && live:
		return Errorf(ErrLeaseConflict, "lease_conflict", "",
			"thread %s is claimed by %s until %s", h.ThreadID, l.AgentID, l.ExpiresAt)
	case token != 0 && token != l.LeaseToken:
		return Errorf(ErrStaleToken, "stale_lease_token", "lease_token",
			"%d is stale: the current lease token on thread %s is %d", token, h.ThreadID, l.LeaseToken)
	case l.AgentID != agent:
		return Errorf(ErrNotLeaseHolder, "not_lease_holder", "",
			"%s does not hold the lease on thread %s (last held by %s, expired %s); claim it first", agent, h.ThreadID, l.AgentID, l.ExpiresAt)
	case !live:
		return Errorf(ErrLeaseExpired, "lease_expired", "",
			"the lease of %s on thread %s expired at %s; claim it again", agent, h.ThreadID, l.ExpiresAt)
	}
	return nil
}

// ValidateLimit checks a limit on how many results to return.
func ValidateLimit(limit int) error {
	if limit < 1 || limit > MaxLimit {
		return Invalid("limit", "%d is out of range: give 1 to %d", limit, MaxLimit)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// PrepareNewThread checks a thread-creating send and fills in its
// defaults: the address (to), the subject (a typed message's content, else
// the summary's or body's first line), the priority (normal), run and task
// labels.
func PrepareNewThread(in *SendInput) (Address, error) {
	if in.To == "" {
		return Address{}, Invalid("to", "is required: name an agent, several (a,b) or a team (@team)")
	}
	addr, err := ParseAddress("to", in.To)
	if err != nil {
		return Address{}, err
	}
	if strings.TrimSpace(in.Subject) == "" && in.Type != "" && strings.TrimSpace(in.Summary+in.Body) == "" {
		// A typed message says what it is about in its content.
		in.Subject = ContentSubject(in.PayloadJSON)
		if in.Subject == "" {
			in.Subject = Shorten(ContentSummary(json.RawMessage(in.PayloadJSON)), 80)
		}
		if in.Subject == "" {
			in.Subject = in.Type
		}
	}
	if strings.TrimSpace(in.Subject) == "" {
		// A message to an agent needs no separate subject: its summary, or
		// its body's first line, serves.
		in.Subject = Shorten(FirstLine(in.Summary), 80)
		if in.Subject == "" {
			in.Subject = Shorten(FirstLine(in.Body), 80)
		}
		if in.Subject == "" {
			return Address{}, Invalid("subject", "is required when send creates a thread (or give {summary} or {body}: its first line becomes the subject)")
		}
	}
	if err := ValidateText("subject", in.Subject, MaxSubjectLen); err != nil {
		return Address{}, err
	}
	if in.Priority == "" {
		in.Priority = "normal"
	}
	if err := ValidateKind("priority", in.Priority, Priorities); err != nil {
		return Address{}, err
	}
	if err := ValidateLabel("run", in.RunID); err != nil {
		return Address{}, err
	}
	if err := ValidateLabel("task", in.TaskID); err != nil {
		return Address{}, err
	}
	return addr, nil
}

// UpdateKind checks an update's status and content and returns the kind
// of message it writes and its default summary.
func UpdateKind(status string, c Content) (kind, def string, err error) {
	switch status {
	case StatusInProgress:
		return KindProgress, "in progress", nil
	case StatusBlocked:
		if strings.TrimSpace(c.Summary) == "" {
			return "", "", Invalid("summary", "is required with {status} blocked: say exactly what is missing")
		}
		return KindQuestion, "", nil
	case "":
		return "", "", Invalid("status", "is required: in_progress or blocked")
	}
	return "", "", Invalid("status", "%q is not one of in_progress|blocked", status)
}

// CheckResult checks the content of a done (failed false) or fail.
func CheckResult(c Content, failed bool) error {
	if strings.TrimSpace(c.Summary) != "" {
		return nil
	}
	if failed {
		return Invalid("summary", "is required: say why it failed")
	}
	return Invalid("summary", "is required: say what the result is")
}

// ValidateMembers checks team members (at least one when need) and drops
// repeats, keeping the order.
func ValidateMembers(members []string, need bool) ([]string, error) {
	if need && len(members) == 0 {
		return nil, Invalid("member", "is required: name at least one agent")
	}
	var out []string
	for _, m := range members {
		if err := ValidateAgent("member", m); err != nil {
			return nil, err
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// PrepareTask checks a task to push and fills in its defaults: the owner
// ("main") and the parent (the owner).
func PrepareTask(spec *TaskSpec, prompt string) error {
	if spec.Owner == "" {
		spec.Owner = "main"
	}
	if err := ValidateAgent("agent", spec.Owner); err != nil {
		return err
	}
	if spec.Parent == "" {
		spec.Parent = spec.Owner
	}
	if err := ValidateAgent("parent", spec.Parent); err != nil {
		return err
	}
	if spec.Name != "" {
		if err := ValidateAgent("name", spec.Name); err != nil {
			return err
		}
	}
	if err := ValidateLabel("model", spec.Model); err != nil {
		return err
	}
	if spec.TimeoutSeconds < 0 || spec.TimeoutSeconds > MaxLeaseSecs {
		return Invalid("timeout_seconds", "%d is out of range: give 0 (no limit) to %d", spec.TimeoutSeconds, MaxLeaseSecs)
	}
	if strings.TrimSpace(prompt) == "" {
		return Invalid("prompt", "is required: a task needs a prompt to run on")
	}
	return ValidateText("prompt", prompt, len(prompt))
}

// PrepareReplyWait checks a wait-reply's cursor and filter. It returns
// the kinds that answer the wait, and whether the wait goes by the
// agent's read cursor (no cursor given, no request id).
func PrepareReplyWait(cur ReplyCursor, f ReplyFilter) (kinds []string, byCursor bool, err error) {
	kinds = f.Kinds
	if len(kinds) == 0 {
		kinds = DefaultWaitKinds
		if len(f.Types) > 0 || f.RequestID != "" {
			kinds = Kinds // the type or the request says what answers
		}
	}
	for _, k := range kinds {
		if err := ValidateKind("kinds", k, Kinds); err != nil {
			return nil, false, err
		}
	}
	for _, t := range f.Types {
		if err := ValidateType("types", t); err != nil {
			return nil, false, err
		}
	}
	if f.RequestID != "" {
		if err := ValidateLabel("request_id", f.RequestID); err != nil {
			return nil, false, err
		}
	}
	if cur.AfterMessage != "" {
		if err := ValidateID("after_message", cur.AfterMessage); err != nil {
			return nil, false, err
		}
		if cur.HasEvent {
			return nil, false, Invalid("after_message", "and {after_event} cannot both be given: give one, not both")
		}
	}
	if cur.HasEvent && cur.AfterEvent < 0 {
		return nil, false, Invalid("after_event", "must be 0 or more")
	}
	// A wait for a request's response with no cursor looks from the
	// request on: a response that came before the wait is found at once.
	byCursor = cur.Agent != "" && cur.AfterMessage == "" && !cur.HasEvent && f.RequestID == ""
	if byCursor {
		if err := ValidateAgent("agent", cur.Agent); err != nil {
			return nil, false, err
		}
	}
	return kinds, byCursor, nil
}
