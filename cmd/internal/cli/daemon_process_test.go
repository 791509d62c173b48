package cli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestDaemonCrashLoop kills the daemon with SIGKILL at random instants
// while 1,000 descriptors are dropped, restarting it each time. Afterwards
// every descriptor must be finished exactly once and the store must hold
// exactly 1,000 threads, one per descriptor.
func TestDaemonCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	const n = 1000
	db, _ := newStore(t, 0)
	in := filepath.Join(t.TempDir(), "intake")
	os.Mkdir(in, 0o700)
	bin := lookInbox(t, "inbox")
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "daemon", "--db", db, "--intake", in)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			storetest.Drop(t, in, fmt.Sprintf("job-%04d.task.json", i), fmt.Sprintf(`{"version":1,"kind":"prompt","prompt":"job %d"}`, i))
			if i%50 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	pending := func() int {
		m, _ := filepath.Glob(filepath.Join(in, "*.task.json"))
		return len(m)
	}
	kills := 0
	deadline := time.Now().Add(3 * time.Minute)
	// The kill comes 5-65 ms after the start, plus a slack that grows
	// while kills make no progress: a slower build (-race) or machine
	// must not be killed before it can finish a batch.
	slack, stuck, done := time.Duration(0), 0, finished(in)
	for {
		cmd := start()
		time.Sleep(slack + time.Duration(5+rand.IntN(60))*time.Millisecond)
		if finishedAll(in, n) {
			// Let it start once more without a kill, so that its start-up
			// clean-up runs to the end.
			time.Sleep(200 * time.Millisecond)
		}
		if !finishedAll(in, n) {
			cmd.Process.Kill()
			cmd.Wait()
			kills++
			if f := finished(in); f > done {
				done, stuck = f, 0
			} else if stuck++; stuck >= 25 {
				slack, stuck = min(slack+10*time.Millisecond, 2*time.Second), 0
			}
			if time.Now().After(deadline) {
				t.Fatalf("not finished after %d kills: %d pending", kills, pending())
			}
			continue
		}
		// A clean stop: the restarted daemon has removed the temp files
		// its killed predecessors left behind.
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		break
	}
	wg.Wait()
	t.Logf("%d descriptors finished across %d kill -9s of the daemon (final kill slack %v)", n, kills, slack)
	threads := map[string]string{}
	for i := 0; i < n; i++ {
		name := filepath.Join(in, fmt.Sprintf("job-%04d.task.json", i))
		if _, err := os.Stat(name + ".processed"); err != nil {
			t.Fatalf("%s: not processed: %v", name, err)
		}
		if _, err := os.Stat(name); err == nil {
			t.Fatalf("%s is still pending", name)
		}
		data, err := os.ReadFile(name + ".result")
		if err != nil {
			t.Fatal(err)
		}
		var r intakeResult
		if err := json.Unmarshal(data, &r); err != nil || !r.OK || r.ThreadID == "" {
			t.Fatalf("%s.result: %s", name, data)
		}
		if other, dup := threads[r.ThreadID]; dup {
			t.Fatalf("thread %s serves both %s and %s", r.ThreadID, other, name)
		}
		threads[r.ThreadID] = name
	}
	s, err := spool.Open(db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.List(inbox.ListFilter{Limit: inbox.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("the store holds %d threads for %d descriptors", len(all), n)
	}
	for _, th := range all {
		if _, ok := threads[th.ThreadID]; !ok {
			t.Errorf("thread %s (%s) belongs to no descriptor", th.ThreadID, th.Subject)
		}
	}
	entries, _ := os.ReadDir(in)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("leftover temp file %s", e.Name())
		}
	}
}

// finished counts the descriptors with a .processed file.
func finished(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, "*.task.json.processed"))
	return len(m)
}

// finishedAll reports whether all n descriptors have a .processed file.
func finishedAll(dir string, n int) bool { return finished(dir) == n }
