package spool_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

func TestInitIsIdempotentAndRefusesForeignDirs(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a", "store")
	created, err := spool.Init(db, false)
	if err != nil || !created {
		t.Fatalf("first Init: created %v err %v", created, err)
	}
	created, err = spool.Init(db, false)
	if err != nil || created {
		t.Fatalf("second Init: created %v err %v, want false nil", created, err)
	}
	fi, err := os.Stat(db)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("store mode %v err %v, want 0700", fi.Mode().Perm(), err)
	}
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("x"), 0o600)
	if _, err := spool.Init(foreign, false); !errors.Is(err, inbox.ErrInvalidInput) {
		t.Fatalf("Init on a non-empty foreign dir: %v, want inbox.ErrInvalidInput", err)
	}
	if _, err := spool.Open(t.Context(), filepath.Join(t.TempDir(), "nope"), spool.Options{}); !errors.Is(err, inbox.ErrNotInitialized) {
		t.Fatalf("Open of a missing store: %v, want inbox.ErrNotInitialized", err)
	}
}

func TestNewerFormatIsRefused(t *testing.T) {
	_, db := storetest.New(t, spool.Options{})
	os.WriteFile(filepath.Join(db, "inbox.json"), []byte(`{"format":"inbox-store","version":99}`), 0o600)
	if _, err := spool.Open(t.Context(), db, spool.Options{}); !errors.Is(err, inbox.ErrFormat) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("Open: %v, want inbox.ErrFormat naming version 99", err)
	}
}

func TestLifecycleAndEvents(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	r := send(t, s, "X")
	tid := r.Thread.ThreadID
	c, err := s.Claim(t.Context(), "X", tid, 60)
	if err != nil {
		t.Fatal(err)
	}
	if c.Lease.LeaseToken != 1 || c.Thread.Status != inbox.StatusClaimed {
		t.Fatalf("claim: %+v %+v", c.Thread, c.Lease)
	}
	if _, err := s.Update(t.Context(), "X", tid, inbox.StatusBlocked, 1, inbox.Content{Summary: "need input"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reply(t.Context(), "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: "here"}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Done(t.Context(), "X", tid, 1, inbox.Content{Summary: "finished"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Thread.Status != inbox.StatusDone || !d.Lease.Released() {
		t.Fatalf("done: %+v %+v", d.Thread, d.Lease)
	}
	types := []string{}
	for _, ev := range allEvents(t, s, 0) {
		types = append(types, ev.EventType)
	}
	want := "thread_created thread_claimed thread_updated message_added thread_done"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if d.Thread.LastEventID != 5 {
		t.Fatalf("last_event_id %d, want 5", d.Thread.LastEventID)
	}
}

func TestTransitions(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	tid := send(t, s, "X").Thread.ThreadID
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"update before claim", func() error {
			_, err := s.Update(t.Context(), "X", tid, inbox.StatusInProgress, 0, inbox.Content{})
			return err
		}, inbox.ErrInvalidState},
		{"done before claim", func() error { _, err := s.Done(t.Context(), "X", tid, 0, inbox.Content{Summary: "x"}); return err }, inbox.ErrInvalidState},
		{"claim", func() error { _, err := s.Claim(t.Context(), "X", tid, 60); return err }, nil},
		{"claim by another", func() error { _, err := s.Claim(t.Context(), "Y", tid, 60); return err }, inbox.ErrLeaseConflict},
		{"update by another", func() error {
			_, err := s.Update(t.Context(), "Y", tid, inbox.StatusInProgress, 0, inbox.Content{})
			return err
		}, inbox.ErrLeaseConflict},
		{"reclaim by holder", func() error { _, err := s.Claim(t.Context(), "X", tid, 60); return err }, nil},
		{"stale token", func() error {
			_, err := s.Update(t.Context(), "X", tid, inbox.StatusInProgress, 1, inbox.Content{})
			return err
		}, inbox.ErrStaleToken},
		{"current token", func() error {
			_, err := s.Update(t.Context(), "X", tid, inbox.StatusInProgress, 2, inbox.Content{})
			return err
		}, nil},
		{"blocked without summary", func() error {
			_, err := s.Update(t.Context(), "X", tid, inbox.StatusBlocked, 0, inbox.Content{})
			return err
		}, inbox.ErrInvalidInput},
		{"cancel by leader", func() error {
			_, err := s.Cancel(t.Context(), "leader", tid, inbox.Content{Summary: "stop"})
			return err
		}, nil},
		{"done after cancel", func() error { _, err := s.Done(t.Context(), "X", tid, 0, inbox.Content{Summary: "x"}); return err }, inbox.ErrInvalidState},
		{"reply after cancel", func() error {
			_, err := s.Reply(t.Context(), "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: "x"})
			return err
		}, inbox.ErrInvalidState},
		{"claim after cancel", func() error { _, err := s.Claim(t.Context(), "X", tid, 60); return err }, inbox.ErrInvalidState},
	}
	for _, c := range cases {
		err := c.do()
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Fatalf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestLeaseExpiry(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	_, db := storetest.New(t, spool.Options{})
	s, _ := spool.Open(t.Context(), db, spool.Options{Now: clock})
	tid := send(t, s, "X").Thread.ThreadID
	if _, err := s.Claim(t.Context(), "X", tid, 10); err != nil {
		t.Fatal(err)
	}
	now = now.Add(11 * time.Second)
	if _, err := s.Renew(t.Context(), "X", tid, 10, 0); !errors.Is(err, inbox.ErrLeaseExpired) {
		t.Fatalf("renew after expiry: %v, want inbox.ErrLeaseExpired", err)
	}
	if _, err := s.Claim(t.Context(), "Y", tid, 10); err != nil {
		t.Fatalf("claim of an expired lease: %v", err)
	}
	if _, err := s.Done(t.Context(), "X", tid, 0, inbox.Content{Summary: "late"}); !errors.Is(err, inbox.ErrLeaseConflict) {
		t.Fatalf("old holder's done: %v, want inbox.ErrLeaseConflict", err)
	}
	now = now.Add(20 * time.Second)
	if _, err := s.Update(t.Context(), "X", tid, inbox.StatusInProgress, 0, inbox.Content{}); !errors.Is(err, inbox.ErrNotLeaseHolder) {
		t.Fatalf("update by a non-holder after Y's lease lapsed: %v, want inbox.ErrNotLeaseHolder", err)
	}
}

func TestValidation(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	bad := []struct {
		name string
		in   inbox.SendInput
		flag string
	}{
		{"slash in agent", inbox.SendInput{From: "a/b", To: "X", Subject: "s"}, "from"},
		{"dotdot agent", inbox.SendInput{From: "boss", To: "..", Subject: "s"}, "to"},
		{"NUL in agent", inbox.SendInput{From: "bo\x00ss", To: "X", Subject: "s"}, "from"},
		{"long agent", inbox.SendInput{From: strings.Repeat("a", 65), To: "X", Subject: "s"}, "from"},
		{"missing subject", inbox.SendInput{From: "boss", To: "X"}, "subject"},
		{"bad kind", inbox.SendInput{From: "boss", To: "X", Subject: "s", Kind: "chat"}, "kind"},
		{"bad priority", inbox.SendInput{From: "boss", To: "X", Subject: "s", Priority: "urgent"}, "priority"},
		{"bad payload", inbox.SendInput{From: "boss", To: "X", Subject: "s", Content: inbox.Content{PayloadJSON: "{nope"}}, "payload_json"},
		{"thread path", inbox.SendInput{From: "boss", ThreadID: "../../etc", Content: inbox.Content{Body: "x"}}, "thread"},
		{"subject too long with --thread", inbox.SendInput{From: "boss", ThreadID: "thr_x", Subject: strings.Repeat("s", inbox.MaxSubjectLen+1), Content: inbox.Content{Body: "x"}}, "subject"},
	}
	for _, c := range bad {
		_, err := s.Send(t.Context(), c.in)
		var e *inbox.Error
		if !errors.As(err, &e) || !errors.Is(err, inbox.ErrInvalidInput) || e.Field != c.flag {
			t.Errorf("%s: got %v (field %q), want inbox.ErrInvalidInput naming %q", c.name, err, fieldOf(err), c.flag)
		}
	}
	if n := len(allEvents(t, s, 0)); n != 0 {
		t.Fatalf("refused sends wrote %d events", n)
	}
	if _, err := s.Show(t.Context(), "thr_doesnotexist"); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("show of an unknown thread: %v, want inbox.ErrNotFound", err)
	}
}

func fieldOf(err error) string {
	var e *inbox.Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

func TestIdempotency(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	in := inbox.SendInput{From: "boss", To: "X", Subject: "once", Content: inbox.Content{IdempotencyKey: "k1"}}
	a, err := s.Send(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Send(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Replayed || a.Thread.ThreadID != b.Thread.ThreadID || a.Message.MessageID != b.Message.MessageID {
		t.Fatalf("retry made %s/%s, first %s/%s", b.Thread.ThreadID, b.Message.MessageID, a.Thread.ThreadID, a.Message.MessageID)
	}
	tid := a.Thread.ThreadID
	rep := func() (*inbox.Result, error) {
		return s.Reply(t.Context(), "boss", "", tid, inbox.KindQuestion, inbox.Content{Summary: "status?", IdempotencyKey: "k1"})
	}
	r1, err := rep()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rep()
	if err != nil || !r2.Replayed || r2.Message.MessageID != r1.Message.MessageID {
		t.Fatalf("reply retry: %v %+v", err, r2)
	}
	if _, err := s.Cancel(t.Context(), "boss", tid, inbox.Content{IdempotencyKey: "k1"}); !errors.Is(err, inbox.ErrIdempotencyMismatch) {
		t.Fatalf("key reused by cancel: %v, want inbox.ErrIdempotencyMismatch", err)
	}
	v, _ := s.Show(t.Context(), tid)
	if len(v.Messages) != 2 || len(allEvents(t, s, 0)) != 2 {
		t.Fatalf("%d messages, %d events after retries, want 2 and 2", len(v.Messages), len(allEvents(t, s, 0)))
	}
}

// TestFetchOrderLeasesAndUnread: fetch lists high priority first, then
// oldest first. The store's clock stands still, so that every thread is
// made in one millisecond: their order is the order ids made in the same
// millisecond sort in (inbox.NewID's, which is the order they were made).
func TestFetchOrderLeasesAndUnread(t *testing.T) {
	now := time.Now()
	_, db := storetest.New(t, spool.Options{})
	s, err := spool.Open(t.Context(), db, spool.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	low, _ := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "X", Subject: "low", Priority: "low"})
	norm1 := send(t, s, "X")
	high, _ := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "X", Subject: "high", Priority: "high"})
	norm2 := send(t, s, "X")
	send(t, s, "Y")
	ts, err := s.Fetch(t.Context(), "X", nil, 10, false)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, th := range ts {
		got = append(got, th.ThreadID)
	}
	want := []string{high.Thread.ThreadID, norm1.Thread.ThreadID, norm2.Thread.ThreadID, low.Thread.ThreadID}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("fetch order %v, want %v", got, want)
	}
	if ts, _ := s.Fetch(t.Context(), "X", nil, 2, false); len(ts) != 2 {
		t.Fatalf("limit 2 gave %d", len(ts))
	}
	// A blocked thread whose lease another agent took is hidden from X.
	tid := norm1.Thread.ThreadID
	s.Claim(t.Context(), "X", tid, 60)
	s.Update(t.Context(), "X", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "q"})
	if ts, _ := s.Fetch(t.Context(), "X", []string{inbox.StatusBlocked}, 10, false); len(ts) != 1 {
		t.Fatalf("X's own blocked thread: fetch gave %d, want 1", len(ts))
	}
	// Unread: X's own question does not make the thread unread for X.
	s.MarkRead(t.Context(), "X", tid, 0)
	if ts, _ := s.Fetch(t.Context(), "X", []string{inbox.StatusBlocked}, 10, true); len(ts) != 0 {
		t.Fatalf("after mark-read: %d unread", len(ts))
	}
	s.Update(t.Context(), "X", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "still waiting"})
	if ts, _ := s.Fetch(t.Context(), "X", []string{inbox.StatusBlocked}, 10, true); len(ts) != 0 {
		t.Fatalf("X's own message made the thread unread")
	}
	s.Reply(t.Context(), "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: "answer"})
	if ts, _ := s.Fetch(t.Context(), "X", []string{inbox.StatusBlocked}, 10, true); len(ts) != 1 {
		t.Fatalf("after an answer: %d unread, want 1", len(ts))
	}
	// list sees everything, newest first.
	all, err := s.List(t.Context(), inbox.ListFilter{Limit: 50})
	if err != nil || len(all) != 5 || all[0].ThreadID < all[4].ThreadID {
		t.Fatalf("list: %d threads, err %v", len(all), err)
	}
}

// threadDir finds a thread's directory by the layout in docs/FORMAT.md.
func threadDir(db, tid string) string { return filepath.Join(db, "threads", tid) }

func TestTornEventLogTailIsRepaired(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	send(t, s, "X")
	seg := newestSegment(t, db)
	f, _ := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"event_id":2,"run_id":"","tas`) // a crash mid-append
	f.Close()
	if n := len(allEvents(t, s, 0)); n != 1 {
		t.Fatalf("readers saw %d events with a torn tail, want 1", n)
	}
	send(t, s, "X")
	evs := allEvents(t, s, 0)
	if len(evs) != 2 || evs[1].EventID != 2 {
		t.Fatalf("after repair: %d events, last id %d", len(evs), evs[len(evs)-1].EventID)
	}
	bad, _ := filepath.Glob(filepath.Join(db, "events", "*.bad"))
	if len(bad) != 1 {
		t.Fatalf("torn tail not set aside: %v", bad)
	}
}

func TestGarbageLineInEventLogIsSkipped(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	send(t, s, "X")
	f, _ := os.OpenFile(newestSegment(t, db), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{\"event_id\":2,\"garbage\":true,\"crc\":\"00000000\"}\n\x00\x00\x00")
	f.Close()
	send(t, s, "X")
	evs := allEvents(t, s, 0)
	if len(evs) != 2 || evs[1].EventID != 2 || evs[1].EventType != inbox.EventThreadCreated {
		t.Fatalf("events after garbage: %+v", evs)
	}
}

func TestOrphanMessageIsDiscarded(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	tid := send(t, s, "X").Thread.ThreadID
	// A writer died after renaming message 2 into place, before committing.
	orphan := filepath.Join(threadDir(db, tid), "m-00000002.json")
	os.WriteFile(orphan, []byte(`{"message_id":"msg_orphan","seq":2}`), 0o600)
	if v, _ := s.Show(t.Context(), tid); len(v.Messages) != 1 {
		t.Fatalf("show counted an uncommitted message: %d", len(v.Messages))
	}
	r, err := s.Reply(t.Context(), "boss", "", tid, inbox.KindProgress, inbox.Content{Summary: "real"})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := s.Show(t.Context(), tid)
	if len(v.Messages) != 2 || v.Messages[1].MessageID != r.Message.MessageID {
		t.Fatalf("messages after settle: %+v", v.Messages)
	}
}

func TestHeaderCommittedWithoutEventGetsItsEvent(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	tid := send(t, s, "X").Thread.ThreadID
	seg := newestSegment(t, db)
	before, _ := os.ReadFile(seg)
	if _, err := s.Reply(t.Context(), "boss", "", tid, inbox.KindProgress, inbox.Content{Summary: "p"}); err != nil {
		t.Fatal(err)
	}
	// A writer died after committing the header, before appending the event.
	os.WriteFile(seg, before, 0o600)
	if n := len(allEvents(t, s, 0)); n != 1 {
		t.Fatalf("setup: %d events", n)
	}
	if _, err := s.Claim(t.Context(), "X", tid, 60); err != nil {
		t.Fatal(err)
	}
	evs := allEvents(t, s, 0)
	types := []string{}
	for _, ev := range evs {
		types = append(types, ev.EventType)
	}
	if strings.Join(types, " ") != "thread_created message_added thread_claimed" {
		t.Fatalf("events after settle: %v", types)
	}
	v, _ := s.Show(t.Context(), tid)
	if v.Thread.LastEventID != 3 || len(v.Messages) != 2 {
		t.Fatalf("thread after settle: %+v", v.Thread)
	}
}

// TestRetriedSendSettlesAMissingEvent: a thread-creating send with a key
// died after its commit point (the first message renamed into place) and
// before its event reached the log; the retry with the same key must not
// acknowledge the thread until its event is in the log. Before this was
// settled, a daemon restarted after SIGKILL replayed such descriptors and
// the next new thread took the missing event's id.
func TestRetriedSendSettlesAMissingEvent(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	send(t, s, "X")
	seg := newestSegment(t, db)
	before, _ := os.ReadFile(seg)
	in := inbox.SendInput{From: "boss", To: "X", Subject: "keyed", Content: inbox.Content{IdempotencyKey: "k1"}}
	first, err := s.Send(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(seg, before, 0o600) // the event never reached the log
	if n := len(allEvents(t, s, 0)); n != 1 {
		t.Fatalf("setup: %d events", n)
	}
	again, err := s.Send(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.Thread.ThreadID != first.Thread.ThreadID {
		t.Fatalf("retry: replayed=%v thread %s, want a replay of %s", again.Replayed, again.Thread.ThreadID, first.Thread.ThreadID)
	}
	evs := allEvents(t, s, 0)
	if len(evs) != 2 || evs[1].ThreadID != first.Thread.ThreadID || evs[1].EventType != inbox.EventThreadCreated {
		t.Fatalf("events after the retry: %+v", evs)
	}
	if again.Thread.LastEventID != evs[1].EventID {
		t.Fatalf("retry returned last_event_id %d, the log has %d", again.Thread.LastEventID, evs[1].EventID)
	}
	// A new thread now gets a fresh id, not the one the crash left unused.
	third := send(t, s, "X")
	if third.Message.EventID != evs[1].EventID+1 {
		t.Fatalf("next thread's event %d, want %d", third.Message.EventID, evs[1].EventID+1)
	}
}

func TestTornHeaderAndLeaseFilesAreSettled(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	tid := send(t, s, "X").Thread.ThreadID
	if _, err := s.Claim(t.Context(), "X", tid, 60); err != nil {
		t.Fatal(err)
	}
	dir := threadDir(db, tid)
	f, _ := os.OpenFile(filepath.Join(dir, "thread.log"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"thread_id":"` + tid + `","status":"do`) // torn header append
	f.Close()
	os.WriteFile(filepath.Join(dir, "lease.json"), []byte("{garbage"), 0o600)
	v, err := s.Show(t.Context(), tid)
	if err != nil || v.Thread.Status != inbox.StatusClaimed {
		t.Fatalf("reader with torn header: %v %+v", err, v)
	}
	if _, err := s.Done(t.Context(), "X", tid, 1, inbox.Content{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	v, _ = s.Show(t.Context(), tid)
	if v.Thread.Status != inbox.StatusDone || !v.Lease.Released() {
		t.Fatalf("after done: %+v %+v", v.Thread, v.Lease)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "lease.json"))
	if !strings.Contains(string(data), `"released_at":"`) {
		t.Fatalf("lease file not rewritten: %s", data)
	}
}

func TestSegmentRotation(t *testing.T) {
	_, db := storetest.New(t, spool.Options{})
	s, _ := spool.Open(t.Context(), db, spool.Options{SegmentBytes: 2000})
	for i := 0; i < 10; i++ {
		send(t, s, "X")
	}
	segs, _ := filepath.Glob(filepath.Join(db, "events", "*.jsonl"))
	if len(segs) < 3 {
		t.Fatalf("%d segments after 10 events with a 2000-byte bound", len(segs))
	}
	evs := allEvents(t, s, 0)
	if len(evs) != 10 || evs[9].EventID != 10 {
		t.Fatalf("%d events across segments", len(evs))
	}
	var after []int64
	s.Events(t.Context(), 6, func(ev *inbox.Event) bool { after = append(after, ev.EventID); return true })
	if len(after) != 4 || after[0] != 7 {
		t.Fatalf("Events(6) gave %v", after)
	}
	if id, _ := s.LastEventID(t.Context()); id != 10 {
		t.Fatalf("LastEventID %d", id)
	}
}
