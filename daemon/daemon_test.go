package daemon_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/daemon"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// readJSON decodes the JSON file at path into v.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
}

// exists fails the test unless path exists.
func exists(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// TestRunInProcess drives the daemon's goroutines (intake watcher, event
// tail, lease expiry) in one process, so that go test -race covers them:
// a burst with one bad descriptor, an .outcome, a lease expiry, and a
// clean stop.
func TestRunInProcess(t *testing.T) {
	r := startDaemon(t)
	dir := r.dir
	// Another handle on the store, as another process would have.
	s, err := spool.Open(t.Context(), r.db, spool.Options{})
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
		r.processed(t, n)
		var res daemon.Result
		readJSON(t, filepath.Join(dir, n+".result"), &res)
		if !res.OK || res.ThreadID == "" || res.Descriptor == nil || res.Descriptor.Name != n {
			t.Fatalf("%s.result: %+v", n, res)
		}
		exists(t, filepath.Join(dir, n+".processed"))
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Fatalf("%s is both pending and processed", n)
		}
		tids = append(tids, res.ThreadID)
	}
	r.log.wait(t, 1, "descriptor refused", `file="bad.task.json"`)
	var bad daemon.Result
	readJSON(t, filepath.Join(dir, "bad.task.json.result"), &bad)
	if bad.OK || bad.Error == "" {
		t.Fatalf("bad descriptor accepted: %+v", bad)
	}
	exists(t, filepath.Join(dir, "bad.task.json.failed"))

	// Finishing a thread writes its descriptor's .outcome.
	c, err := s.Claim(t.Context(), "coordinator", tids[0], 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Done(t.Context(), "coordinator", tids[0], c.Lease.LeaseToken, inbox.Content{Summary: "finished"}); err != nil {
		t.Fatal(err)
	}
	r.log.wait(t, 1, "outcome written", `file="a.task.json"`)
	var out daemon.Outcome
	readJSON(t, filepath.Join(dir, "a.task.json.outcome"), &out)
	if out.Status != "done" || out.ThreadID != tids[0] || out.Summary != "finished" {
		t.Fatalf("outcome: %+v", out)
	}

	// A lease of one second expires into a lease_expired event.
	if _, err := s.Claim(t.Context(), "coordinator", tids[1], 1); err != nil {
		t.Fatal(err)
	}
	r.log.wait(t, 1, "lease expired", fmt.Sprintf("thread=%q", tids[1]))
	expired := false
	s.Events(t.Context(), 0, func(ev *inbox.Event) bool {
		expired = expired || (ev.ThreadID == tids[1] && ev.EventType == "lease_expired")
		return true
	})
	if !expired {
		t.Error("no lease_expired event for an expired lease")
	}
	r.stop()
}

// TestStaleTempsRemoved plants the temp files a killed daemon leaves (its
// own short ".inbox-daemon.tmp<digits>" names, and the names earlier
// versions gave them) beside a dropper's temp file: at start the daemon
// removes its own and leaves the dropper's, and once a descriptor is
// finished no temp file of its writes is left.
func TestStaleTempsRemoved(t *testing.T) {
	s, db := newStore(t)
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
	r := start(t, s, db, 0)
	r.processed(t, "go.task.json")
	r.stop()
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

// noErrors fails the test if the daemon logged an error: a swapped
// intake directory is no failure of the daemon's.
func noErrors(t *testing.T, r *running) {
	t.Helper()
	if n, _ := r.log.count("ERROR "); n > 0 {
		t.Errorf("the daemon logged %d errors", n)
	}
}

// TestIntakeReplaced swaps the intake directory while the daemon runs:
// moved away and another renamed into its place at once; moved away, and
// the directory the daemon recreated then replaced by another; deleted.
// The safety-net sweep is set to an hour, so each drop into the directory
// that is there now can only be picked up because the daemon noticed the
// swap and watches the new directory: every one must be processed, and
// nothing in a moved-away directory, and the daemon logs no error.
func TestIntakeReplaced(t *testing.T) {
	s, db := newStore(t)
	r := start(t, s, db, time.Hour)
	dir := r.dir
	desc := `{"version":1,"kind":"prompt","prompt":"replaced"}`
	storetest.Drop(t, dir, "first.task.json", desc)
	r.processed(t, "first.task.json")

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
		r.processed(t, name)
		storetest.Drop(t, old, "stray.task.json", desc)
	}

	// Moved away; once the daemon has recreated it, that directory is
	// replaced by another.
	recreated, _ := r.log.count("recreated")
	if err := os.Rename(dir, filepath.Join(db, "gone")); err != nil {
		t.Fatal(err)
	}
	r.log.wait(t, recreated+1, "recreated")
	fresh := filepath.Join(db, "fresh")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rename(fresh, dir); err != nil {
		t.Fatal(err)
	}
	storetest.Drop(t, dir, "after-recreate.task.json", desc)
	r.processed(t, "after-recreate.task.json")

	// Deleted: recreated and watched.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r.log.wait(t, recreated+2, "recreated")
	storetest.Drop(t, dir, "after-delete.task.json", desc)
	r.processed(t, "after-delete.task.json")

	// Nothing was taken from a moved-away directory: its drops were made
	// before the later ones, which were all processed.
	for i := 0; i < 20; i++ {
		p := filepath.Join(db, fmt.Sprint("old", i), "stray.task.json")
		if _, err := os.Stat(p + ".result"); err == nil {
			t.Errorf("%s was processed", p)
		}
	}
	noErrors(t, r)
}

// swapAt sets the daemon's test hook to call swap once, the first time
// the daemon reaches moment m while when() holds, and returns a channel
// closed after the swap. The hook is cleared when the test ends, after
// the daemon started later has stopped.
func swapAt(t *testing.T, m string, when func() bool, swap func()) <-chan struct{} {
	swapped := make(chan struct{})
	var done atomic.Bool
	daemon.SetHook(func(at string) {
		if at == m && !done.Load() && when() && done.CompareAndSwap(false, true) {
			swap()
			close(swapped)
		}
	})
	t.Cleanup(func() { daemon.SetHook(nil) })
	return swapped
}

// waitClosed waits up to 10 s for c to be closed.
func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never happened", what)
	}
}

// rename renames old to new for a hook, which runs on a daemon's
// goroutine and so cannot stop the test.
func rename(t *testing.T, old, new string) {
	if err := syscall.Rename(old, new); err != nil {
		t.Error(err)
	}
}

// TestIntakeReplacedWhileArming swaps the intake directory at the worst
// moment: while the daemon arms its watch on the directory it has just
// recreated (the intake was moved away, and another directory is renamed
// into its place a moment later). With the safety-net sweep at an hour,
// a drop into the new directory is picked up only if the daemon noticed
// that the directory it watches is not the one at the path any more.
func TestIntakeReplacedWhileArming(t *testing.T) {
	s, db := newStore(t)
	dir, fresh := filepath.Join(db, "intake"), filepath.Join(db, "fresh")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	swapped := swapAt(t, "arm", armed.Load, func() { rename(t, fresh, dir) })
	r := start(t, s, db, time.Hour)
	desc := `{"version":1,"kind":"prompt","prompt":"replaced"}`
	storetest.Drop(t, dir, "first.task.json", desc)
	r.processed(t, "first.task.json")

	armed.Store(true) // the daemon re-arms only once the intake is gone
	if err := os.Rename(dir, filepath.Join(db, "gone")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, swapped, "re-arming the watch after the intake was moved away")
	storetest.Drop(t, dir, "second.task.json", desc)
	r.processed(t, "second.task.json")
	noErrors(t, r)
}

// TestIntakeMovedWhileListed moves the intake directory away just after
// the daemon armed its watch on it and before it lists it: the listing
// fails, and the daemon, instead of logging an error and waiting for the
// next wake-up, recreates the directory and lists that at once.
func TestIntakeMovedWhileListed(t *testing.T) {
	s, db := newStore(t)
	dir := filepath.Join(db, "intake")
	var armed atomic.Bool
	swapped := swapAt(t, "list", armed.Load, func() { rename(t, dir, filepath.Join(db, "gone")) })
	r := start(t, s, db, time.Hour)
	// The next sweep moves the directory; a file written into it makes
	// one, unless one already has (and moved the directory: the write
	// then finds none).
	armed.Store(true)
	if err := os.WriteFile(filepath.Join(dir, "nudge"), nil, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	waitClosed(t, swapped, "the move between arming and listing")
	r.log.wait(t, 1, "recreated")
	storetest.Drop(t, dir, "after.task.json", `{"version":1,"kind":"prompt","prompt":"moved"}`)
	r.processed(t, "after.task.json")
	noErrors(t, r)
}

// TestIntakeMovedWhileFinishing moves the intake directory away after a
// descriptor's .result and rename are in it and before they are made
// durable: the directory they are in is fsynced all the same (an fsync
// by path failed on the moved directory, the descriptor was left
// undispatched in the daemon's eyes, and its .outcome never written), and
// the daemon goes on with a recreated directory.
func TestIntakeMovedWhileFinishing(t *testing.T) {
	s, db := newStore(t)
	dir, gone := filepath.Join(db, "intake"), filepath.Join(db, "gone")
	renamed := filepath.Join(dir, "x.task.json.processed")
	swapped := swapAt(t, "finish", func() bool { _, err := os.Stat(renamed); return err == nil },
		func() { rename(t, dir, gone) })
	r := start(t, s, db, time.Hour)
	desc := `{"version":1,"kind":"prompt","prompt":"moved"}`
	storetest.Drop(t, dir, "x.task.json", desc)
	waitClosed(t, swapped, "the move between the renames and the fsync")
	r.processed(t, "x.task.json")
	var res daemon.Result
	readJSON(t, filepath.Join(gone, "x.task.json.result"), &res)
	if !res.OK {
		t.Fatalf("x.task.json.result: %+v", res)
	}
	r.log.wait(t, 1, "recreated")
	storetest.Drop(t, dir, "after.task.json", desc)
	r.processed(t, "after.task.json")
	noErrors(t, r)
}
