package spool_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestCancelLockWait: a call waiting for a thread's lock that another
// holder keeps returns context.Canceled as soon as its context ends, long
// before the lock timeout.
func TestCancelLockWait(t *testing.T) {
	s, db := storetest.New(t, spool.Options{LockTimeout: time.Minute})
	r := send(t, s, "worker")
	tid := r.Thread.ThreadID
	// The thread's lock file, as the store names it (thread.go threadLock).
	h := fnv.New32a()
	h.Write([]byte(tid))
	held := flock.New(filepath.Join(db, "locks", fmt.Sprintf("thread-%02x.lock", h.Sum32()%256)))
	if err := held.Lock(); err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, "worker", tid, 60)
		done <- err
	}()
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("claim returned %s after the cancel", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("claim did not return within 30 s of its context's cancel")
	}
	// The abandoned wait does not keep the lock: once released, a claim
	// goes through.
	held.Unlock()
	if _, err := s.Claim(t.Context(), "worker", tid, 60); err != nil {
		t.Fatalf("claim after the cancelled one: %v", err)
	}
}
