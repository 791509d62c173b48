package spool_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/spool"
)

// Helpers the store's black-box tests share; a fresh store comes from
// storetest.New.

// send starts a thread from boss to to and returns its result.
func send(t *testing.T, s *spool.Store, to string) *inbox.Result {
	t.Helper()
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: to, Subject: "work for " + to, Content: inbox.Content{Body: "please"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// allEvents returns the events after the event id after, in order.
func allEvents(t *testing.T, s *spool.Store, after int64) []*inbox.Event {
	t.Helper()
	var out []*inbox.Event
	if err := s.Events(t.Context(), after, func(ev *inbox.Event) bool { out = append(out, ev); return true }); err != nil {
		t.Fatalf("Events(%d): %v", after, err)
	}
	return out
}

// newestSegment returns the path of the newest event-log segment.
func newestSegment(t *testing.T, db string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(db, "events", "*.jsonl"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no event-log segment in %s: %v", db, err)
	}
	slices.Sort(segs)
	return segs[len(segs)-1]
}
