package spool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// Import makes dir a new store holding the history another store exported
// (inbox migrate): it writes the events as this format's log, each line
// with the state, message and keys its event carried, and lets replay
// build everything else from the log, as it does after a power cut
// (threads, messages, leases, cursors, idempotency and task records, teams,
// mailboxes, the index). collected lists, per agent, the event ids of the
// mail it had collected; their mailbox entries move to .collected/. It
// returns how many events it wrote.
func Import(ctx context.Context, dir string, history func(fn func(*inbox.HistoryEntry) error) error, collected map[string][]int64) (int, error) {
	created, err := Init(dir, false)
	if err != nil {
		return 0, err
	}
	if !created {
		return 0, inbox.Errorf(inbox.ErrInvalidInput, "store_exists", "to", "%s holds a store already: migrate copies into a new one (name another)", dir)
	}
	var f *os.File
	var buf []byte
	n := 0
	type threadState struct {
		h   *header
		rev int64
	}
	threads := map[string]*threadState{}
	next := int64(0)
	err = history(func(e *inbox.HistoryEntry) error {
		if f == nil {
			// The new store's log is empty: its segment makes way for the
			// one that starts at the history's first event.
			if olds, err := os.ReadDir(filepath.Join(dir, eventsDir)); err == nil {
				for _, o := range olds {
					os.Remove(filepath.Join(dir, eventsDir, o.Name()))
				}
			}
			var err error
			if f, err = openFile(filepath.Join(dir, eventsDir, segmentName(e.Event.EventID)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
				return inbox.Storage(err, "write the event log")
			}
			next = e.Event.EventID
		}
		if e.Event.EventID != next {
			return inbox.Corrupt(nil, "the history jumps from event %d to %d", next-1, e.Event.EventID)
		}
		next++
		ev := &logEvent{Event: e.Event, Task: e.Task}
		if e.Team != nil {
			ev.Team = &teamRecord{Team: *e.Team, EventID: e.Event.EventID}
		}
		tid := e.Event.ThreadID
		if e.Thread != nil {
			ts := threads[tid]
			if ts == nil {
				ts = &threadState{}
				threads[tid] = ts
			}
			if ts.h == nil || !sameLease(ts.h.Lease, e.Lease) {
				ts.rev++
			}
			h := &header{Thread: *e.Thread, Lease: e.Lease, LastFrom: e.LastFrom, Origin: e.Origin}
			h.LastEventID = 0
			if h.Lease == nil {
				h.LeaseRev = 0
			} else {
				h.LeaseRev = ts.rev
			}
			ts.h = h
			ev.State = h
		}
		if m := e.Message; m != nil {
			mf := &msgFile{Message: *m}
			mf.EventID = e.Event.EventID
			if e.NewThreadKey != "" {
				mf.IdempotencyKey, mf.IdempotencyCommand, mf.IdempotencyArgs = e.NewThreadKey, "send", e.NewThreadArgs
			}
			ev.Message = mf
		}
		if k := e.Key; k != nil {
			ev.Idem = &idemRecord{Key: k.Key, Command: k.Command, ThreadID: tid, MessageID: k.MessageID, Seq: k.Seq, CreatedAt: e.Event.CreatedAt, Args: k.Args}
		}
		buf = append(buf, encodeEvent(ev)...)
		n++
		if len(buf) > 1<<20 {
			if _, err := f.Write(buf); err != nil {
				return inbox.Storage(err, "write the event log")
			}
			buf = buf[:0]
		}
		return nil
	})
	if f != nil {
		if _, werr := f.Write(buf); err == nil && werr != nil {
			err = inbox.Storage(werr, "write the event log")
		}
		if serr := f.Sync(); err == nil && serr != nil {
			err = inbox.Storage(serr, "write the event log")
		}
		f.Close()
	}
	if err != nil {
		return 0, err
	}
	// A watermark of another boot: the next open replays the whole log.
	w := watermark{BootID: "imported", EventID: 0}
	if err := os.WriteFile(filepath.Join(dir, durableFile), w.appendJSON(nil), 0o600); err != nil {
		return 0, inbox.Storage(err, "write %s", durableFile)
	}
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		return 0, err
	}
	for agent, ids := range collected {
		want := map[int64]bool{}
		for _, id := range ids {
			want[id] = true
		}
		mdir := s.mailboxPath(agent)
		names, err := os.ReadDir(mdir)
		if err != nil {
			continue
		}
		for _, d := range names {
			if ev, _, _, _, ok := parseMarker(d.Name()); ok && want[ev] {
				if err := os.Rename(filepath.Join(mdir, d.Name()), filepath.Join(mdir, collectedDir, d.Name())); err != nil {
					return 0, inbox.Storage(err, "mark mail of %s collected", agent)
				}
			}
		}
		if err := syncDir(filepath.Join(mdir, collectedDir)); err != nil {
			return 0, err
		}
		if err := syncDir(mdir); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func sameLease(a, b *inbox.Lease) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
