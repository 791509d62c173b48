package watcher_test

import (
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
		expectWake(t, w, 2*time.Second)
		expectQuiet(t, w, 60*time.Millisecond)
		os.WriteFile(filepath.Join(dir, "new"), []byte("x"), 0o600)
		expectWake(t, w, 2*time.Second)
		w.Close()
	}
}

func TestWakeUpsCoalesce(t *testing.T) {
	dir := t.TempDir()
	w, err := watcher.New(dir, watcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < 50; i++ {
		os.WriteFile(filepath.Join(dir, "f"), []byte{byte(i)}, 0o600)
	}
	expectWake(t, w, 2*time.Second)
	// Fifty changes leave at most one more pending wake-up, never a backlog.
	select {
	case <-w.C:
	case <-time.After(50 * time.Millisecond):
	}
	expectQuiet(t, w, 60*time.Millisecond)
}
