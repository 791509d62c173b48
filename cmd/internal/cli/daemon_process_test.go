package cli

import (
	"bufio"
	"encoding/json"
	"errors"
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
	"github.com/inbox-dev/inbox/internal/natstest"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// TestDaemonCrashLoop kills the daemon with SIGKILL at random instants
// while descriptors are dropped (200; 1,000 in the long run), restarting
// it each time. Afterwards every descriptor must be finished exactly once
// and the store must hold exactly one thread per descriptor.
func TestDaemonCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	n := 200
	if testproc.Long {
		n = 1000
	}
	db, _ := newStore(t, 0)
	in := filepath.Join(t.TempDir(), "intake")
	os.Mkdir(in, 0o700)
	bin := testproc.Installed(t, "inbox")
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
	s, err := spool.Open(t.Context(), db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.List(t.Context(), inbox.ListFilter{Limit: inbox.MaxLimit})
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

// TestNATSDaemonLockDir runs the daemon of a NATS store whose lock must
// fall back to the temp directory ($HOME/.cache cannot be made), with a
// directory planted there as inbox-UID by someone else: a symlink, a
// directory others may write to, a file, one owned by another user (as
// root). The daemon refuses each with a clear error naming the directory
// and writes nothing through it; with no directory there it makes one,
// 0700, and serves.
func TestNATSDaemonLockDir(t *testing.T) {
	srv := natstest.Start(t)
	db := natstest.Store(srv, "lockdir")
	bin := testproc.Installed(t, "inbox")
	work := t.TempDir()
	notDir := filepath.Join(work, "home-is-a-file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	intakeDir := filepath.Join(work, "intake")
	command := func(tmp string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append(args, "--db", db)...)
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "INBOX_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") && !strings.HasPrefix(kv, "TMPDIR=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "INBOX_TEST_NATS="+srv.ClientURL(), "INBOX_TEST_DIRS=1", "HOME="+notDir, "TMPDIR="+tmp)
		return cmd
	}
	if out, err := command(work, "init").CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	name := fmt.Sprintf("inbox-%d", os.Getuid())
	victim := filepath.Join(work, "victim")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		plant func(p string) error
		want  string
	}{
		{"symlink", func(p string) error { return os.Symlink(victim, p) }, "symlink"},
		{"others may write", func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chmod(p, 0o777)
		}, "others may write"},
		{"group may write", func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chmod(p, 0o770)
		}, "others may write"},
		{"file", func(p string) error { return os.WriteFile(p, nil, 0o600) }, "not a directory"},
		{"another user's", func(p string) error {
			if os.Getuid() != 0 {
				return errSkip
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chown(p, 65534, 65534)
		}, "belongs to uid 65534"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			p := filepath.Join(tmp, name)
			if err := c.plant(p); err == errSkip {
				t.Skip("needs root")
			} else if err != nil {
				t.Fatal(err)
			}
			cmd := command(tmp, "daemon", "--intake", intakeDir)
			var buf strings.Builder
			cmd.Stdout, cmd.Stderr = &buf, &buf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// A daemon that took the directory serves until stopped.
			timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Signal(os.Interrupt) })
			err := cmd.Wait()
			timer.Stop()
			out := buf.String()
			code, xerr := exitStatus(err)
			if xerr != nil {
				t.Fatalf("%v\n%s", xerr, out)
			}
			if code != exitStorage || !strings.Contains(out, p) || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, output %q; want exit %d naming %s and saying %q", code, out, exitStorage, p, c.want)
			}
			if entries, _ := os.ReadDir(victim); len(entries) > 0 {
				t.Errorf("the daemon wrote %s through the symlink", entries[0].Name())
			}
		})
	}

	// Nothing there: the daemon makes the directory, 0700, and serves.
	tmp := t.TempDir()
	cmd := command(tmp, "daemon", "--intake", intakeDir)
	stderr := startPiped(t, cmd, cmd.StderrPipe)
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		ok := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "daemon started") && !ok {
				ok = true
				started <- true
			}
		}
		if !ok {
			started <- false
		}
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatal("the daemon exited without starting")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not start within 20 s")
	}
	fi, err := os.Lstat(filepath.Join(tmp, name))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("lock directory: %v, %v; want a directory 0700", fi, err)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Errorf("daemon: %v", err)
	}
}

// errSkip is returned by a test case's set-up that cannot run here.
var errSkip = errors.New("skip")
