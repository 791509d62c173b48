package spool

import (
	"context"
	"github.com/inbox-dev/inbox"
)

// Events calls fn for each event with an id greater than after, in order,
// until fn returns false. The state snapshot is stripped from each event.
func (s *Store) Events(ctx context.Context, after int64, fn func(ev *inbox.Event) bool) error {
	segs, err := s.log.segments()
	if err != nil {
		return err
	}
	from := Pos{Segment: segs[0]}
	for i, first := range segs {
		if first <= after+1 && (i == len(segs)-1 || segs[i+1] > after+1) {
			from = Pos{Segment: first}
		}
	}
	return s.log.scan(from, func(ev *logEvent, _ Pos) bool {
		if ev.EventID <= after {
			return true
		}
		return fn(&ev.Event)
	})
}

// LastEventID returns the id of the newest event in the log (0 if none).
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	id, _, err := s.log.lastID()
	return id, err
}
