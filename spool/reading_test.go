package spool

import (
	"testing"

	"github.com/inbox-dev/inbox"
)

// TestReadCollectsAmongRenewals: a read collects the agent's mail of a
// thread whose header log has many lines that add no message (renewals)
// between the ones that do, each entry found by name; and headerCount
// reads a header line's count as the full decode does.
func TestReadCollectsAmongRenewals(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	r, err := s.Send(ctx, inbox.SendInput{From: "lead", To: "w", Subject: "long work"})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Claim(ctx, "w", tid, 60))
	for range 5 {
		must(s.Renew(ctx, "w", tid, 60, 0))
	}
	must(s.Update(ctx, "w", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "which?"}))
	must(s.Reply(ctx, "lead", "", tid, inbox.KindAnswer, inbox.Content{Summary: "this"}))
	for range 5 {
		must(s.Renew(ctx, "w", tid, 60, 0))
	}
	must(s.Reply(ctx, "other", "w", tid, inbox.KindProgress, inbox.Content{Summary: "fyi"}))
	if items, _ := s.Mailbox(ctx, "w", ""); len(items) != 2 {
		t.Fatalf("w's mailbox before the read: %d, want the answer and the note", len(items))
	}
	must(s.MarkRead(ctx, "w", tid, 0))
	if items, _ := s.Mailbox(ctx, "w", ""); len(items) != 0 {
		t.Errorf("w's mailbox after reading the thread: %d entries left", len(items))
	}

	data, err := readFile(s.threadDir(tid) + "/" + headerLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for len(data) > 0 {
		i := 0
		for i < len(data) && data[i] != '\n' {
			i++
		}
		body, ok := checkLine(data[:i])
		if !ok {
			t.Fatalf("a damaged header line: %q", data[:i])
		}
		var h header
		if err := h.decodeJSON(body); err != nil {
			t.Fatal(err)
		}
		if n, ok := headerCount(body); !ok || n != h.MessageCount {
			t.Errorf("headerCount = %d, %v; the header says %d", n, ok, h.MessageCount)
		}
		lines++
		data = data[min(i+1, len(data)):]
	}
	if lines < 10 {
		t.Errorf("only %d header lines: the renewals were not logged as expected", lines)
	}
}
