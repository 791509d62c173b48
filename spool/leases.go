package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// HeldLeases lists the threads in a leased status (claimed, in_progress,
// blocked) whose lease has not been released, with their expiry. The
// daemon seeds its expiry schedule with it.
func (s *Store) HeldLeases(ctx context.Context) ([]inbox.LeaseExpiry, error) {
	entries, err := s.idx.ByStatus([]string{inbox.StatusClaimed, inbox.StatusInProgress, inbox.StatusBlocked})
	if err != nil {
		return nil, s.indexErr(err)
	}
	var out []inbox.LeaseExpiry
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.ThreadID] {
			continue
		}
		seen[e.ThreadID] = true
		h, err := s.readHeader(e.ThreadID)
		if errors.Is(err, inbox.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if h.Lease == nil || h.Lease.Released() || inbox.IsTerminal(h.Status) {
			continue
		}
		exp, err := inbox.ParseTime(h.Lease.ExpiresAt)
		if err != nil {
			continue
		}
		out = append(out, inbox.LeaseExpiry{ThreadID: h.ThreadID, ExpiresAt: exp})
	}
	return out, nil
}

// ExpireLease releases a thread's lease if it has expired and records a
// lease_expired event: a claimed or in_progress thread goes back to
// pending (a blocked one stays blocked, its question still open), so it
// is offered by fetch and any agent may claim it. It reports whether it
// expired anything; a lease renewed in the meantime is left alone.
func (s *Store) ExpireLease(ctx context.Context, tid string) (bool, error) {
	if err := inbox.ValidateID("thread", tid); err != nil {
		return false, err
	}
	expired := false
	err := s.mutate(ctx, tid, func(t *tx) error {
		l := t.h.Lease
		if l == nil || l.Released() || inbox.IsTerminal(t.h.Status) || l.Live(t.now) {
			t.skip = true
			return nil
		}
		expired = true
		rel := *l
		rel.Release(l.ExpiresAt)
		t.setLease(rel)
		from := t.h.Status
		if from != inbox.StatusBlocked {
			t.h.Status = inbox.StatusPending
			if len(t.h.Recipients) > 0 {
				// A thread sent to several agents is offered to all of
				// them again.
				t.h.AssignedTo = ""
			}
		}
		payload := jsonrec.Fields{}.Str("agent_id", l.AgentID).Num("lease_token", l.LeaseToken).
			Str("expired_at", l.ExpiresAt).Str("from", from).Str("to", t.h.Status).JSON()
		t.ev = inbox.Event{EventType: inbox.EventLeaseExpired, Agent: l.AgentID,
			Summary: "lease of " + l.AgentID + " expired", PayloadJSON: payload}
		return nil
	})
	return expired, err
}

// LastMessage returns a thread and its latest message.
func (s *Store) LastMessage(ctx context.Context, tid string) (*inbox.Thread, *inbox.Message, error) {
	h, dir, _, err := s.viewHeader(tid)
	if err != nil {
		return nil, nil, err
	}
	if h.MessageCount == 0 {
		return &h.Thread, nil, nil
	}
	m, err := s.readMessageAt(dir, tid, h.MessageCount)
	return &h.Thread, m, err
}

// ErrDaemonRunning is returned by LockDaemon when another daemon holds the
// store's daemon lock.
var ErrDaemonRunning = errors.New("another daemon is running")

// LockDaemon takes the store's daemon lock without waiting, so that two
// daemons never serve one store. It records the holder (say, its pid) and
// the time in the lock file for the error message a second daemon prints.
// The returned function releases the lock.
func (s *Store) LockDaemon(ctx context.Context, holder string) (release func(), err error) {
	p := s.lockFile("daemon.lock")
	lk := newLock(p, s.fileMode)
	ok, err := tryLock(lk)
	if err != nil {
		return nil, inbox.Storage(err, "lock %s", p)
	}
	if !ok {
		other, _ := readFile(p)
		msg := "another inbox daemon is running on this store"
		if h := strings.TrimSpace(string(other)); h != "" {
			msg += " (" + h + ")"
		}
		return nil, &inbox.Error{Code: "daemon_running", Err: inbox.ErrLeaseConflict, Cause: ErrDaemonRunning,
			Rule: msg + "; stop it first, or give this one another {db}"}
	}
	f, err := openFile(p, os.O_WRONLY, s.fileMode)
	if err == nil {
		f.Truncate(0)
		fmt.Fprintf(f, "%s, started %s", holder, inbox.FormatTime(s.now()))
		f.Close()
	}
	return func() { lk.Unlock() }, nil
}
