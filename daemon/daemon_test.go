package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/daemon"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// waitFile waits up to 10 s for path to exist and decodes it into v
// (unless v is nil).
func waitFile(t *testing.T, path string, v any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			if v == nil {
				return
			}
			if err := json.Unmarshal(data, v); err != nil {
				t.Fatalf("%s: %v\n%s", path, err, data)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRunInProcess drives the daemon's goroutines (intake watcher, event
// tail, lease expiry) in one process, so that go test -race covers them:
// a burst with one bad descriptor, an .outcome, a lease expiry, and a
// clean stop.
func TestRunInProcess(t *testing.T) {
	dir, stop := startDaemon(t)
	db := filepath.Dir(dir)
	s, err := spool.Open(db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a.task.json", "b.task.json", "c.task.json"}
	for _, n := range names {
		storetest.Drop(t, dir, n, `{"version":1,"kind":"prompt","prompt":"job `+n+`"}`)
	}
	storetest.Drop(t, dir, "bad.task.json", `{"version":1,"kind":"prompt","prompt":"x","colour":"red"}`)

	var tids []string
	for _, n := range names {
		var r daemon.Result
		waitFile(t, filepath.Join(dir, n+".result"), &r)
		if !r.OK || r.ThreadID == "" || r.Descriptor == nil || r.Descriptor.Name != n {
			t.Fatalf("%s.result: %+v", n, r)
		}
		// .result is written first, then the descriptor is renamed.
		waitFile(t, filepath.Join(dir, n+".processed"), nil)
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Fatalf("%s is both pending and processed", n)
		}
		tids = append(tids, r.ThreadID)
	}
	var bad daemon.Result
	waitFile(t, filepath.Join(dir, "bad.task.json.result"), &bad)
	if bad.OK || bad.Error == "" {
		t.Fatalf("bad descriptor accepted: %+v", bad)
	}
	waitFile(t, filepath.Join(dir, "bad.task.json.failed"), nil)

	// Finishing a thread writes its descriptor's .outcome.
	r, err := s.Claim("coordinator", tids[0], 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Done("coordinator", tids[0], r.Lease.LeaseToken, inbox.Content{Summary: "finished"}); err != nil {
		t.Fatal(err)
	}
	var out daemon.Outcome
	waitFile(t, filepath.Join(dir, "a.task.json.outcome"), &out)
	if out.Status != "done" || out.ThreadID != tids[0] || out.Summary != "finished" {
		t.Fatalf("outcome: %+v", out)
	}

	// A lease of one second expires into a lease_expired event.
	if _, err := s.Claim("coordinator", tids[1], 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for expired := false; !expired; {
		s.Events(0, func(ev *inbox.Event) bool {
			expired = expired || (ev.ThreadID == tids[1] && ev.EventType == "lease_expired")
			return true
		})
		if time.Now().After(deadline) {
			t.Fatal("no lease_expired event for an expired lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
}

// TestStaleTempsRemoved plants the temp files a killed daemon leaves (its
// own short ".inbox-daemon.tmp<digits>" names, and the names earlier
// versions gave them) beside a dropper's temp file: at start the daemon
// removes its own and leaves the dropper's, and once a descriptor is
// finished no temp file of its writes is left.
func TestStaleTempsRemoved(t *testing.T) {
	s, db := storetest.New(t, spool.Options{Source: "daemon"})
	dir := filepath.Join(db, "intake")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := []string{".inbox-daemon.tmp123456789", ".old.task.json.result42", ".old.task.json.outcome7"}
	kept := []string{".mine.tmp", ".inbox-daemon.tmpx1"}
	for _, n := range append(stale, kept...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	storetest.Drop(t, dir, "go.task.json", `{"version":1,"kind":"prompt","prompt":"go"}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, daemon.Config{Store: s, Intake: dir, IntakeTo: "coordinator"}) }()
	waitFile(t, filepath.Join(dir, "go.task.json.processed"), nil)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var dot []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			dot = append(dot, e.Name())
		}
	}
	slices.Sort(dot)
	slices.Sort(kept)
	if !slices.Equal(dot, kept) {
		t.Errorf("temp files left: %q, want only the dropper's %q", dot, kept)
	}
}

// syncBuffer is a log the daemon writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// count returns how many times s occurs in the log.
func (b *syncBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.b.String(), s)
}

// wait waits up to 10 s for s to occur n times in the log.
func (b *syncBuffer) wait(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.count(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon never logged %q %d times", s, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIntakeReplaced swaps the intake directory while the daemon runs:
// moved away and another renamed into its place at once; moved away, and
// the directory the daemon recreated then replaced by another; deleted.
// The safety-net sweep is set to an hour, so each drop into the directory
// that is there now can only be picked up because the daemon noticed the
// swap and watches the new directory: every one must be processed, and
// nothing in a moved-away directory.
func TestIntakeReplaced(t *testing.T) {
	s, db := storetest.New(t, spool.Options{Source: "daemon"})
	dir := filepath.Join(db, "intake")
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{Store: s, Intake: dir, IntakeTo: "coordinator", Sweep: time.Hour,
			Log: slog.New(slog.NewTextHandler(&log, nil))})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", log.b.String())
		}
	}()
	desc := `{"version":1,"kind":"prompt","prompt":"replaced"}`
	log.wait(t, "daemon started", 1)
	storetest.Drop(t, dir, "first.task.json", desc)
	waitFile(t, filepath.Join(dir, "first.task.json.processed"), nil)

	// Moved away and replaced at once, many times over.
	for i := 0; i < 20; i++ {
		fresh, old := filepath.Join(db, fmt.Sprint("new", i)), filepath.Join(db, fmt.Sprint("old", i))
		if err := os.Mkdir(fresh, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir, old); err != nil {
			t.Fatal(err)
		}
		// rename(2) itself, as mv -T does: it replaces the empty directory
		// the daemon may have recreated in between (os.Rename refuses to).
		if err := syscall.Rename(fresh, dir); err != nil {
			t.Fatalf("rename %d: %v", i, err)
		}
		name := fmt.Sprintf("swap%02d.task.json", i)
		storetest.Drop(t, dir, name, desc)
		waitFile(t, filepath.Join(dir, name+".processed"), nil)
		storetest.Drop(t, old, "stray.task.json", desc)
	}

	// Moved away; once the daemon has recreated it, that directory is
	// replaced by another.
	recreated := log.count("recreated")
	if err := os.Rename(dir, filepath.Join(db, "gone")); err != nil {
		t.Fatal(err)
	}
	log.wait(t, "recreated", recreated+1)
	fresh := filepath.Join(db, "fresh")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rename(fresh, dir); err != nil {
		t.Fatal(err)
	}
	storetest.Drop(t, dir, "after-recreate.task.json", desc)
	waitFile(t, filepath.Join(dir, "after-recreate.task.json.processed"), nil)

	// Deleted: recreated and watched.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	log.wait(t, "recreated", recreated+2)
	storetest.Drop(t, dir, "after-delete.task.json", desc)
	waitFile(t, filepath.Join(dir, "after-delete.task.json.processed"), nil)

	// Nothing was taken from a moved-away directory: its drops were made
	// before the later ones, which were all processed.
	for i := 0; i < 20; i++ {
		p := filepath.Join(db, fmt.Sprint("old", i), "stray.task.json")
		if _, err := os.Stat(p + ".result"); err == nil {
			t.Errorf("%s was processed", p)
		}
	}
}

// TestIntakeReplacedWhileArming swaps the intake directory at the worst
// moment: while the daemon arms its watch on the directory it has just
// recreated (the intake was moved away, and another directory is renamed
// into its place a moment later). With the safety-net sweep at an hour,
// a drop into the new directory is picked up only if the daemon noticed
// that the directory it watches is not the one at the path any more.
func TestIntakeReplacedWhileArming(t *testing.T) {
	s, db := storetest.New(t, spool.Options{Source: "daemon"})
	dir := filepath.Join(db, "intake")
	fresh := filepath.Join(db, "fresh")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	daemon.SetArmHook(func() {
		if armed.CompareAndSwap(true, false) {
			if err := syscall.Rename(fresh, dir); err != nil {
				t.Error(err)
			}
		}
	})
	defer daemon.SetArmHook(nil)
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{Store: s, Intake: dir, IntakeTo: "coordinator", Sweep: time.Hour,
			Log: slog.New(slog.NewTextHandler(&log, nil))})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", log.b.String())
		}
	}()
	desc := `{"version":1,"kind":"prompt","prompt":"replaced"}`
	log.wait(t, "daemon started", 1)
	storetest.Drop(t, dir, "first.task.json", desc)
	waitFile(t, filepath.Join(dir, "first.task.json.processed"), nil)

	armed.Store(true)
	if err := os.Rename(dir, filepath.Join(db, "gone")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for armed.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the daemon never re-armed its watch after the intake was moved away")
		}
		time.Sleep(time.Millisecond)
	}
	storetest.Drop(t, dir, "second.task.json", desc)
	waitFile(t, filepath.Join(dir, "second.task.json.processed"), nil)
}
