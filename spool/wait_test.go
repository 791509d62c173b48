package spool_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestNoLostWakeup lands a reply exactly in the windows where a wake-up
// could be lost: after the waiter's first check but before it arms its
// watch (at=1), and after the armed re-check but before it blocks (at=2);
// many times, with notifications and with polling. The waiter must wake
// every time, long before its timeout.
func TestNoLostWakeup(t *testing.T) {
	for _, c := range []struct {
		poll bool
		at   int
	}{{false, 1}, {false, 2}, {true, 1}, {true, 2}} {
		poll := c.poll
		t.Run(fmt.Sprintf("poll=%v/at=%d", c.poll, c.at), func(t *testing.T) {
			s, _ := storetest.New(t, spool.Options{})
			n := 100
			if poll {
				n = 20
			}
			for i := 0; i < n; i++ {
				tid := send(t, s, "X").Thread.ThreadID
				opt := inbox.WaitOptions{Timeout: 5 * time.Second, ForcePoll: poll}
				var want string
				var once sync.Once
				calls := 0
				opt.AfterCheck = func() {
					if calls++; calls != c.at {
						return
					}
					once.Do(func() {
						r, err := s.Reply(t.Context(), "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: fmt.Sprint("answer ", i)})
						if err != nil {
							t.Error(err)
							return
						}
						want = r.Message.MessageID
					})
				}
				start := time.Now()
				w, err := s.WaitReply(context.Background(), tid, inbox.ReplyCursor{}, inbox.ReplyFilter{}, opt)
				if err != nil {
					t.Fatal(err)
				}
				if !w.Woke || w.Message.MessageID != want {
					t.Fatalf("iteration %d: woke %v message %+v, want %s", i, w.Woke, w.Message, want)
				}
				if time.Since(start) > 2*time.Second {
					t.Fatalf("iteration %d: woke only after %v", i, time.Since(start))
				}
			}
		})
	}
}

func TestWaitReplyCursorsAndKinds(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	tid := send(t, s, "X").Thread.ThreadID
	ctx := context.Background()
	now := inbox.WaitOptions{}
	// Nothing yet: timeout 0 checks once.
	if w, err := s.WaitReply(ctx, tid, inbox.ReplyCursor{HasEvent: true}, inbox.ReplyFilter{}, now); err != nil || w.Woke {
		t.Fatalf("empty thread: %+v %v", w, err)
	}
	p, _ := s.Reply(ctx, "boss", "", tid, inbox.KindProgress, inbox.Content{Summary: "fyi"})
	a, _ := s.Reply(ctx, "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: "a1"})
	c, _ := s.Reply(ctx, "boss", "", tid, inbox.KindControl, inbox.Content{Summary: "c1"})
	w, err := s.WaitReply(ctx, tid, inbox.ReplyCursor{HasEvent: true}, inbox.ReplyFilter{}, now)
	if err != nil || !w.Woke || w.Message.MessageID != a.Message.MessageID || w.NextEventID != a.Message.EventID {
		t.Fatalf("after event 0: %+v %v, want the answer", w, err)
	}
	w, _ = s.WaitReply(ctx, tid, inbox.ReplyCursor{HasEvent: true, AfterEvent: w.NextEventID}, inbox.ReplyFilter{}, now)
	if !w.Woke || w.Message.MessageID != c.Message.MessageID {
		t.Fatalf("chained cursor: %+v, want the control message", w)
	}
	w, _ = s.WaitReply(ctx, tid, inbox.ReplyCursor{HasEvent: true, AfterEvent: w.NextEventID}, inbox.ReplyFilter{}, now)
	if w.Woke || w.NextEventID != c.Message.EventID {
		t.Fatalf("past the last message: %+v", w)
	}
	// A timeout moves the cursor past what it verified (the progress
	// message does not match), so the next wait starts there.
	p2, _ := s.Reply(ctx, "boss", "", tid, inbox.KindProgress, inbox.Content{Summary: "more"})
	w, _ = s.WaitReply(ctx, tid, inbox.ReplyCursor{HasEvent: true, AfterEvent: c.Message.EventID}, inbox.ReplyFilter{}, now)
	if w.Woke || w.NextEventID != p2.Message.EventID {
		t.Fatalf("timeout cursor %d, want %d", w.NextEventID, p2.Message.EventID)
	}
	w, _ = s.WaitReply(ctx, tid, inbox.ReplyCursor{HasEvent: true}, inbox.ReplyFilter{Kinds: []string{inbox.KindProgress}}, now)
	if !w.Woke || w.Message.MessageID != p.Message.MessageID {
		t.Fatalf("kinds=progress: %+v", w)
	}
	w, _ = s.WaitReply(ctx, tid, inbox.ReplyCursor{AfterMessage: a.Message.MessageID}, inbox.ReplyFilter{}, now)
	if !w.Woke || w.Message.MessageID != c.Message.MessageID {
		t.Fatalf("after-message: %+v", w)
	}
	if _, err := s.WaitReply(ctx, tid, inbox.ReplyCursor{AfterMessage: "msg_nope"}, inbox.ReplyFilter{}, now); err == nil {
		t.Fatal("unknown --after-message accepted")
	}
	// No cursor: only what comes after the call starts counts.
	w, _ = s.WaitReply(ctx, tid, inbox.ReplyCursor{}, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: 50 * time.Millisecond})
	if w.Woke {
		t.Fatalf("no cursor woke on an old message: %+v", w)
	}
}

func TestWatch(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	ctx := context.Background()
	// Without a cursor the watch starts at the log's end when it is
	// called: its first check (AfterCheck) comes after that, so what is
	// sent once it ran must wake it.
	checked := make(chan struct{})
	var once sync.Once
	opt := inbox.WaitOptions{Timeout: 30 * time.Second, AfterCheck: func() { once.Do(func() { close(checked) }) }}
	var got *inbox.WaitResult
	var err error
	done := make(chan struct{})
	go func() {
		got, err = s.Watch(ctx, "X", []string{inbox.StatusPending}, nil, opt)
		close(done)
	}()
	<-checked
	send(t, s, "Y") // another agent's thread does not count
	r := send(t, s, "X")
	<-done
	if err != nil || !got.Woke || got.Thread.ThreadID != r.Thread.ThreadID || got.Event.EventType != inbox.EventThreadCreated {
		t.Fatalf("watch for a new thread: %+v %v", got, err)
	}
	after := got.NextEventID
	s.Claim(ctx, "X", r.Thread.ThreadID, 60)
	s.Done(ctx, "X", r.Thread.ThreadID, 0, inbox.Content{Summary: "ok"})
	got, err = s.Watch(ctx, "boss", []string{inbox.StatusDone}, &after, inbox.WaitOptions{Timeout: 30 * time.Second})
	if err != nil || !got.Woke || got.Event.EventType != inbox.EventThreadDone || got.Thread.Status != inbox.StatusDone {
		t.Fatalf("leader watching for done: %+v %v", got, err)
	}
	got, _ = s.Watch(ctx, "boss", []string{inbox.StatusFailed}, &after, inbox.WaitOptions{})
	if got.Woke {
		t.Fatalf("status filter ignored: %+v", got)
	}
}
