package watcher_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/watcher"
)

func expectWake(t *testing.T, w *watcher.Watcher, within time.Duration) {
	t.Helper()
	select {
	case <-w.C:
	case <-time.After(within):
		t.Fatalf("no wake-up within %v", within)
	}
}

func expectQuiet(t *testing.T, w *watcher.Watcher, d time.Duration) {
	t.Helper()
	select {
	case <-w.C:
		t.Fatal("woke up with nothing changed")
	case <-time.After(d):
	}
}

func TestWakesOnAppendAndCreate(t *testing.T) {
	for _, poll := range []bool{false, true} {
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		os.WriteFile(log, []byte("a\n"), 0o600)
		w, err := watcher.New(dir, watcher.Options{ForcePoll: poll, Poll: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if (w.Fallback() != nil) != poll {
			t.Fatalf("poll=%v: fallback %v", poll, w.Fallback())
		}
		expectQuiet(t, w, 60*time.Millisecond)
		f, _ := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString("b\n")
		f.Close()
		expectWake(t, w, 10*time.Second)
		// The append may give more than one wake-up (coalescing is not
		// promised), so the next change is checked by a wake-up alone.
		os.WriteFile(filepath.Join(dir, "new"), []byte("x"), 0o600)
		expectWake(t, w, 10*time.Second)
		w.Close()
	}
}

// TestWakeUpsCoalesce: a burst of changes that nobody reads leaves one
// pending wake-up (C's buffer holds one), not a backlog, and never blocks
// the watcher: the burst wakes the reader, and a change after it, or
// after a second burst, still does. How many wake-ups a burst gives a
// reader who keeps reading is not promised ("many changes may give one"),
// so nothing here counts them against a clock.
func TestWakeUpsCoalesce(t *testing.T) {
	dir := t.TempDir()
	w, err := watcher.New(dir, watcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if c := cap(w.C); c != 1 {
		t.Fatalf("C buffers %d wake-ups, want 1", c)
	}
	for round := 0; round < 2; round++ {
		for i := 0; i < 50; i++ {
			os.WriteFile(filepath.Join(dir, "f"), []byte{byte(i)}, 0o600)
		}
		expectWake(t, w, 10*time.Second)
		os.WriteFile(filepath.Join(dir, fmt.Sprint("after", round)), []byte("x"), 0o600)
		expectWake(t, w, 10*time.Second)
	}
}
