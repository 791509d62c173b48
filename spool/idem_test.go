package spool_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestIdempotencyRecordWithoutArgs: a key recorded by a version that
// kept no arguments with it (no "args" in a thread's idem-*.json, no
// "idempotency_args" on a thread's first message) repeats as it did then:
// a call with other arguments replays, it is not refused.
func TestIdempotencyRecordWithoutArgs(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	ctx := t.Context()
	first, err := s.Send(ctx, inbox.SendInput{From: "boss", To: "w", Subject: "once", Content: inbox.Content{IdempotencyKey: "k-send"}})
	if err != nil {
		t.Fatal(err)
	}
	tid := first.Thread.ThreadID
	reply, err := s.Reply(ctx, "boss", "", tid, inbox.KindProgress, inbox.Content{Summary: "note", IdempotencyKey: "k-reply"})
	if err != nil {
		t.Fatal(err)
	}
	// What is recorded now carries the arguments: another call is refused.
	if _, err := s.Send(ctx, inbox.SendInput{From: "boss", To: "w", Subject: "twice", Content: inbox.Content{IdempotencyKey: "k-send"}}); err == nil {
		t.Fatal("send with another subject: no error, want idempotency_conflict")
	}
	if _, err := s.Reply(ctx, "boss", "", tid, inbox.KindProgress, inbox.Content{Summary: "other", IdempotencyKey: "k-reply"}); err == nil {
		t.Fatal("reply with another summary: no error, want idempotency_conflict")
	}

	// Strip them, as an older version wrote these records.
	strip := regexp.MustCompile(`,"(idempotency_)?args":"[^"]*"`)
	n := 0
	err = filepath.WalkDir(db, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".json" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if out := strip.ReplaceAll(data, nil); len(out) != len(data) {
			n++
			return os.WriteFile(p, out, 0o600)
		}
		return nil
	})
	if err != nil || n < 2 {
		t.Fatalf("stripped %d records (%v), want the send's and the reply's", n, err)
	}

	again, err := s.Send(ctx, inbox.SendInput{From: "boss", To: "w", Subject: "twice", Content: inbox.Content{IdempotencyKey: "k-send"}})
	if err != nil || !again.Replayed || again.Thread.ThreadID != tid {
		t.Fatalf("send with another subject, old record: %v %+v, want the first thread replayed", err, again)
	}
	r, err := s.Reply(ctx, "boss", "", tid, inbox.KindProgress, inbox.Content{Summary: "other", IdempotencyKey: "k-reply"})
	if err != nil || !r.Replayed || r.Message.MessageID != reply.Message.MessageID {
		t.Fatalf("reply with another summary, old record: %v %+v, want the first reply replayed", err, r)
	}
}
