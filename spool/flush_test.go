package spool

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
)

// TestOneFlushPerWrite: an acknowledged send, reply, claim or done waits
// on one flush (the log's), plus the watermark's checkpoint every 256
// events; with concurrent writers, flushes are shared.
func TestOneFlushPerWrite(t *testing.T) {
	s, _ := openTemp(t)
	const n = 300
	var tids []string
	per := func(what string, op func(i int) error) {
		t.Helper()
		before := flushes.Load()
		for i := range n {
			if err := op(i); err != nil {
				t.Fatalf("%s %d: %v", what, i, err)
			}
		}
		got := float64(flushes.Load()-before) / n
		t.Logf("%s: %.3f flushes per write", what, got)
		if got > 1.1 {
			t.Errorf("%s waits on %.3f flushes per write, want at most 1.1", what, got)
		}
	}
	per("send", func(i int) error {
		r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: fmt.Sprint("t", i), Content: inbox.Content{Body: "b"}})
		if err == nil {
			tids = append(tids, r.Thread.ThreadID)
		}
		return err
	})
	per("reply", func(i int) error {
		_, err := s.Reply(t.Context(), "boss", "", tids[i], inbox.KindProgress, inbox.Content{Summary: "note"})
		return err
	})
	per("claim", func(i int) error {
		_, err := s.Claim(t.Context(), "w", tids[i], 60)
		return err
	})
	per("done", func(i int) error {
		_, err := s.Done(t.Context(), "w", tids[i], 0, inbox.Content{Summary: "ok"})
		return err
	})

	// Eight writers on a disk whose flush takes 2 ms: they share flushes.
	flushDelay = 2 * time.Millisecond
	defer func() { flushDelay = 0 }()
	before, shared := flushes.Load(), flushesShared.Load()
	var wg sync.WaitGroup
	const writers, each = 8, 25
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: fmt.Sprint("c", w, i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := float64(flushes.Load()-before) / (writers * each)
	t.Logf("8 concurrent writers: %.3f flushes per write, %d spared", got, flushesShared.Load()-shared)
	if got >= 1 {
		t.Errorf("8 concurrent writers wait on %.3f flushes per write, want fewer than one", got)
	}
}
