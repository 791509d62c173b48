package spool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/index"
)

// Fetch lists candidate threads for agent without claiming them: threads
// assigned to agent in one of statuses that no other agent holds a live
// lease on, high priority first, then oldest. With unread, only threads
// with a message from someone else past agent's read cursor are returned.
// Fetch never writes.
func (s *Store) Fetch(ctx context.Context, agent string, statuses []string, limit int, unread bool) ([]*inbox.Thread, error) {
	statuses, err := inbox.PrepareFetch(agent, statuses, limit)
	if err != nil {
		return nil, err
	}
	look := statuses
	if slices.Contains(statuses, inbox.StatusPending) {
		// A claimed thread whose lease ran out is claimable, daemon or
		// not: it is pending in all but its recorded status.
		for _, st := range []string{inbox.StatusClaimed, inbox.StatusInProgress} {
			if !slices.Contains(look, st) {
				look = append(slices.Clip(look), st)
			}
		}
	}
	entries, err := s.idx.ByAssignee(agent, look)
	if err != nil {
		return nil, s.indexErr(err)
	}
	index.SortForFetch(entries)
	now := s.now()
	out := []*inbox.Thread{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err // a long scan stops when its caller gives up
		}
		if !slices.Contains(statuses, e.Status) && s.leaseSurelyLive(e.ThreadID, now) {
			continue // claimed or in progress under a live lease
		}
		h, err := s.readHeader(e.ThreadID)
		if errors.Is(err, inbox.ErrNotFound) || errors.Is(err, inbox.ErrFormat) {
			continue // gone, or damaged beyond what the log can tell (fsck reports it)
		}
		if err != nil {
			return nil, err
		}
		if h.Status != e.Status || !h.offeredTo(agent) || h.Mail {
			continue // a stale marker
		}
		if h.Lease.Live(now) && h.Lease.AgentID != agent {
			continue
		}
		t := h.view(now)
		if !slices.Contains(statuses, h.Status) && !t.LeaseExpired {
			continue // claimed or in progress under a live lease
		}
		if unread {
			u, err := s.unread(h, agent)
			if err != nil {
				return nil, err
			}
			if !u {
				continue
			}
		}
		out = append(out, t)
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// leaseSurelyLive reports, from lease.json's modification time alone,
// that the thread's lease is live at now. After a lease is committed its
// file's time is set to the lease's end; every other time the file can
// have (written but not yet committed, a crash in between, a release) is
// its last write, which is not in the future. So a time after now proves
// a live lease, and anything else means "read the header".
func (s *Store) leaseSurelyLive(tid string, now time.Time) bool {
	fi, err := os.Stat(filepath.Join(s.threadDir(tid), leaseFile))
	return err == nil && fi.ModTime().After(now)
}

// unread reports whether the thread has a message from someone other than
// agent past agent's read cursor.
func (s *Store) unread(h *header, agent string) (bool, error) {
	c, err := s.readCursor(h.ThreadID, agent)
	if err != nil {
		return false, err
	}
	seen := 0
	if c != nil {
		seen = c.LastReadSeq
	}
	for from, seq := range h.LastFrom {
		if from != agent && seq > seen {
			return true, nil
		}
	}
	return false, nil
}

// List returns threads matching f, newest first.
func (s *Store) List(ctx context.Context, f inbox.ListFilter) ([]*inbox.Thread, error) {
	statuses, err := inbox.PrepareList(f)
	if err != nil {
		return nil, err
	}
	out := []*inbox.Thread{}
	var last string
	var herr error
	now := s.now()
	err = s.idx.Newest(f.AssignedTo, statuses, func(e index.Entry) bool {
		if herr = ctx.Err(); herr != nil {
			return false // a long scan stops when its caller gives up
		}
		if e.ThreadID == last {
			return true // the same thread under a second status
		}
		last = e.ThreadID
		h, err := s.readHeader(e.ThreadID)
		if errors.Is(err, inbox.ErrNotFound) || errors.Is(err, inbox.ErrFormat) {
			return true // gone, or damaged beyond what the log can tell (fsck reports it)
		}
		if err != nil {
			herr = err
			return false
		}
		if !f.Selects(&h.Thread, statuses) {
			return true
		}
		out = append(out, h.view(now))
		return len(out) < f.Limit
	})
	if err != nil {
		return nil, s.indexErr(err)
	}
	if herr != nil {
		return nil, herr
	}
	return out, nil
}

// viewHeader validates tid and reads its header for a reader, from the
// live tree or the archive.
func (s *Store) viewHeader(tid string) (h *header, dir string, archived bool, err error) {
	if err := inbox.ValidateID("thread", tid); err != nil {
		return nil, "", false, err
	}
	dir, archived = s.viewDir(tid)
	h, err = s.readHeaderAt(dir, tid)
	return h, dir, archived, err
}

// viewDir finds a thread's directory for reading: the live tree, else the
// archive (archived threads stay readable).
func (s *Store) viewDir(tid string) (dir string, archived bool) {
	dir = s.threadDir(tid)
	if !exists(dir) {
		if a := s.archivedDir(tid); exists(a) {
			return a, true
		}
	}
	return dir, false
}

// Show returns a thread with every message in order; archived threads too.
func (s *Store) Show(ctx context.Context, tid string) (*inbox.ThreadView, error) {
	h, dir, archived, err := s.viewHeader(tid)
	if err != nil {
		return nil, err
	}
	v := &inbox.ThreadView{Thread: h.view(s.now()), Lease: h.Lease, Archived: archived, Origin: h.Origin}
	if v.Messages, err = s.readMessages(dir, tid, h.MessageCount); err != nil {
		return nil, err
	}
	return v, nil
}

// readMessages reads messages 1..n of a thread, several files at a time.
func (s *Store) readMessages(dir, tid string, n int) ([]*inbox.Message, error) {
	msgs := make([]*inbox.Message, n)
	workers := min(4, n)
	if n < 64 {
		workers = 1
	}
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for seq := w + 1; seq <= n; seq += workers {
				m, err := s.readMessageAt(dir, tid, seq)
				if isDamaged(err) {
					m, err = standIn(tid, seq), nil
				}
				if err != nil {
					errs <- err
					return
				}
				msgs[seq-1] = m
			}
			errs <- nil
		}()
	}
	var first error
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return msgs, first
}

// Thread returns one thread's header; archived threads too.
func (s *Store) Thread(ctx context.Context, tid string) (*inbox.Thread, error) {
	h, _, _, err := s.viewHeader(tid)
	if err != nil {
		return nil, err
	}
	return h.view(s.now()), nil
}
