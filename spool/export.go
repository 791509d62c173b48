package spool

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// History calls fn with every event of the live log, in order, with what
// its line carried (the state it left, the message it added, the keys it
// used): the store's history, for copying it elsewhere. Archived events
// are not included (Archived says whether there are any).
func (s *Store) History(fn func(e *inbox.HistoryEntry) error) error {
	segs, err := s.log.segments()
	if err != nil || len(segs) == 0 {
		return err
	}
	var ferr error
	err = s.log.scanFull(Pos{Segment: segs[0]}, func(ev *logEvent, _ Pos) bool {
		e := &inbox.HistoryEntry{Event: ev.Event, Task: ev.Task}
		if h := ev.State; h != nil {
			t := h.Thread
			t.LastEventID = ev.EventID
			e.Thread, e.Lease, e.LastFrom, e.Origin = &t, h.Lease, h.LastFrom, h.Origin
		}
		if m := ev.Message; m != nil {
			msg := m.Message
			msg.EventID = ev.EventID
			e.Message = &msg
			if m.IdempotencyKey != "" && (m.IdempotencyCommand == "" || m.IdempotencyCommand == "send") {
				e.NewThreadKey, e.NewThreadArgs = m.IdempotencyKey, m.IdempotencyArgs
			}
		}
		if k := ev.Idem; k != nil {
			e.Key = &inbox.IdempotencyUse{Key: k.Key, Command: k.Command, MessageID: k.MessageID, Seq: k.Seq, Args: k.Args}
		}
		if ev.Team != nil {
			team := ev.Team.Team
			e.Team = &team
		}
		ferr = fn(e)
		return ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	return err
}

// Archived reports whether archive has moved threads out of the live tree.
func (s *Store) Archived() bool {
	entries, err := os.ReadDir(filepath.Join(s.dir, archiveDir, threadsDir))
	return err == nil && len(entries) > 0
}

// Collected lists, per agent, the event ids of the mail it has collected.
func (s *Store) Collected() (map[string][]int64, error) {
	out := map[string][]int64{}
	agents, err := os.ReadDir(filepath.Join(s.dir, mailboxDir))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, inbox.Storage(err, "list mailboxes")
	}
	for _, a := range agents {
		names, err := os.ReadDir(filepath.Join(s.mailboxPath(a.Name()), collectedDir))
		if err != nil {
			continue
		}
		for _, n := range names {
			if ev, _, _, _, ok := parseMarker(n.Name()); ok {
				out[a.Name()] = append(out[a.Name()], ev)
			}
		}
	}
	return out, nil
}
