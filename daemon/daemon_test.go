package daemon_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
