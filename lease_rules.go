package inbox

import (
	"slices"
	"strings"
	"time"
)

// PrepareReply checks a reply's sender and says its kind: the kind given,
// else the one its seed-002 type calls for where that is a reply's kind
// (other types reply as progress).
func PrepareReply(from, kind string, c Content) (string, error) {
	if err := ValidateAgent("from", from); err != nil {
		return "", err
	}
	if kind == "" && c.Type != "" {
		kind = KindForType(c.Type)
		if !slices.Contains(ReplyKinds, kind) {
			kind = KindProgress
		}
	}
	if kind == "" {
		return "", Invalid("kind", "is required: one of %s (or give {type})", strings.Join(ReplyKinds, "|"))
	}
	if err := ValidateKind("kind", kind, ReplyKinds); err != nil {
		return "", err
	}
	return kind, nil
}

// ClaimLease decides a claim of thread t (whose lease is cur) by agent for
// secs seconds at now: it refuses an ended thread, mail and a thread
// another agent holds a live lease on, and returns the new lease, whose
// token is larger than every earlier one. The engine records it with the
// thread's move to claimed.
func ClaimLease(t *Thread, cur *Lease, agent string, secs int, now time.Time) (Lease, error) {
	if IsTerminal(t.Status) {
		return Lease{}, InvalidState("thread %s is %s; terminal threads cannot be claimed", t.ThreadID, t.Status)
	}
	if t.Mail {
		return Lease{}, InvalidState("thread %s is mail, not work: there is nothing to claim (collect it with inbox receive, answer it with inbox reply)", t.ThreadID)
	}
	if cur.Live(now) && cur.AgentID != agent {
		return Lease{}, Errorf(ErrLeaseConflict, "lease_conflict", "",
			"thread %s is already claimed by %s until %s", t.ThreadID, cur.AgentID, cur.ExpiresAt)
	}
	var token int64 = 1
	if cur != nil {
		token = cur.LeaseToken + 1
	}
	return Lease{ThreadID: t.ThreadID, AgentID: agent, LeaseToken: token, ClaimedAt: FormatTime(now),
		ExpiresAt: FormatTime(now.Add(time.Duration(secs) * time.Second)), LeaseSeconds: secs}, nil
}

// ClaimWarnings says what a claim of thread t by agent, decided on t as
// it was before the claim, should tell the claimer: that t is assigned to
// another agent, which the claim takes it from (the claim still goes
// ahead). The engine returns them as the claim's Result.Warnings.
func ClaimWarnings(t *Thread, agent string) []string {
	if t.AssignedTo == "" || t.AssignedTo == agent {
		return nil
	}
	return []string{"thread " + t.ThreadID + " was assigned to " + t.AssignedTo + "; this claim takes it from " + t.AssignedTo + " (tell them, or leave it to them)"}
}

// RenewLease decides a renewal of thread t's lease cur by agent (token:
// the caller's, 0 for any) for secs seconds from now, and returns the
// renewed lease.
func RenewLease(t *Thread, cur *Lease, agent string, token int64, secs int, now time.Time) (Lease, error) {
	if IsTerminal(t.Status) {
		return Lease{}, InvalidState("thread %s is %s; there is no lease to renew", t.ThreadID, t.Status)
	}
	if err := CheckHolder(t, cur, agent, token, now); err != nil {
		return Lease{}, err
	}
	l := *cur
	l.ExpiresAt = FormatTime(now.Add(time.Duration(secs) * time.Second))
	l.LeaseSeconds = secs
	return l, nil
}

// LeaseLength is the length lease l was claimed or last renewed with: its
// LeaseSeconds, or for a lease recorded without it its expiry less its
// claim (exact for a lease never renewed), at least a second and at most
// MaxLeaseSecs.
func LeaseLength(l *Lease) int {
	secs := l.LeaseSeconds
	if secs <= 0 {
		claimed, err1 := ParseTime(l.ClaimedAt)
		expires, err2 := ParseTime(l.ExpiresAt)
		if err1 == nil && err2 == nil {
			secs = int(expires.Sub(claimed).Round(time.Second) / time.Second)
		}
	}
	return min(max(secs, 1), MaxLeaseSecs)
}

// WaitKeepsLease decides whether a wait-reply by agent (token: the lease
// token it gave, 0 for none) on thread t keeps the thread's lease l (SPEC
// §4 "A holder's own wait keeps its lease"): only when agent holds l, live
// at now, with that token when one is given, on a thread not ended. A
// wait that names no agent is nobody's: it keeps no lease, so that a
// leader waiting on a worker's thread never keeps a dead worker's lease.
func WaitKeepsLease(t *Thread, l *Lease, agent string, token int64, now time.Time) bool {
	return agent != "" && !IsTerminal(t.Status) && l.Live(now) && l.AgentID == agent && (token == 0 || token == l.LeaseToken)
}

// LeaseRenewAt is when a holder's wait renews lease l: once half its
// length (LeaseLength) is left, so that a wait renews it at most once per
// half of its length (the lease costs one renew per half lease, and a
// renewal that comes late still has half the lease to land in).
func LeaseRenewAt(l *Lease) time.Time {
	expires, err := ParseTime(l.ExpiresAt)
	if err != nil {
		return time.Time{} // at once: the renewal writes a well-formed one
	}
	return expires.Add(-time.Duration(LeaseLength(l)) * time.Second / 2)
}
