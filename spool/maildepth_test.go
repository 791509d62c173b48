package spool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/inbox-dev/inbox"
)

// TestMailDepthAgrees: the count agents shows is what receive would hand
// out, through first messages, replies, collected mail and the markers a
// send left before its commit point (a later message's, and a thread's
// first whose file is not the marker's).
func TestMailDepthAgrees(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	agree := func(when string) {
		t.Helper()
		items, err := s.mailItems("w1", "", true)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.mailDepth("w1")
		if err != nil {
			t.Fatal(err)
		}
		if n != len(items) {
			t.Fatalf("%s: mailDepth %d, mailItems %d", when, n, len(items))
		}
	}
	agree("no mailbox")
	var last *inbox.Result
	for i := range 3 {
		r, err := s.Send(ctx, inbox.SendInput{From: "lead", To: "w1", Subject: fmt.Sprint("t", i)})
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	if _, err := s.Reply(ctx, "lead", "w1", last.Thread.ThreadID, inbox.KindProgress, inbox.Content{Summary: "more"}); err != nil {
		t.Fatal(err)
	}
	agree("three threads and a reply")
	if _, err := s.Collect(ctx, "w1", "", false, 1); err != nil {
		t.Fatal(err)
	}
	agree("after a collect")
	box := s.mailboxPath("w1")
	tid := last.Thread.ThreadID
	// A later message's marker whose send never committed: seq past the
	// thread's count, linked to a stray file.
	stray := filepath.Join(t.TempDir(), "stray")
	if err := os.WriteFile(stray, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(stray, filepath.Join(box, fmt.Sprintf("%016d~lead~%s~%d", 999, tid, 9))); err != nil {
		t.Fatal(err)
	}
	// A first message's marker that is not its thread's first message.
	if err := os.Link(stray, filepath.Join(box, fmt.Sprintf("%016d~lead~%s~%d", 998, "thr_01aaaaaaaaaaaaaaaaaaaaaaaa", 1))); err != nil {
		t.Fatal(err)
	}
	agree("with uncommitted markers")
	if n, _ := s.mailDepth("w1"); n != 3 {
		t.Errorf("mailDepth = %d, want 3 (four messages, one collected)", n)
	}
}
