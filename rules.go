package inbox

import (
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
