package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// holdLockHelper takes an flock on each path, says "locked" and stops
// itself (SIGSTOP): a writer frozen by a debugger while it holds a lock.
func holdLockHelper(paths []string) {
	for _, p := range paths {
		lk := flock.New(p)
		if err := lk.Lock(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(50)
		}
	}
	fmt.Println("locked")
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	select {}
}

// stoppedHolder starts a helper that holds the store's lock files named
// and waits until it is stopped; cleanup kills it.
func stoppedHolder(t *testing.T, db string, locks ...string) int {
	t.Helper()
	var paths []string
	for _, l := range locks {
		paths = append(paths, filepath.Join(db, "locks", l))
	}
	cmd := exec.Command(testproc.Installed(t, "inbox-test-helper"), append([]string{"holdlock"}, paths...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q: %v", line, err)
	}
	// The helper stops itself right after saying so; wait for the kernel
	// to show it stopped (an outside process's state, read until seen).
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if st := s[strings.LastIndexByte(s, ')')+2]; st == 'T' || st == 't' {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper %d never stopped: %s", pid, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLockWaitBounded: a stopped process holding one of the store's locks
// makes each command that needs it fail with 50 (lock_timeout) within
// --lock-timeout, naming the lock and the stopped process, instead of
// waiting forever; the store works again once the holder is gone.
func TestLockWaitBounded(t *testing.T) {
	t.Parallel() // it mostly waits out --lock-timeout
	db, ids := newStore(t, 1)
	tid := ids[0]
	inboxBin := testproc.Installed(t, "inbox")
	run := func(args ...string) (int, map[string]any, string) {
		cmd := exec.Command(inboxBin, append([]string{"--db", db, "--json", "--lock-timeout", "1s"}, args...)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code, err := exitStatus(cmd.Run())
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		json.Unmarshal([]byte(stdout.String()), &v)
		return code, v, stdout.String() + stderr.String()
	}
	var stripes []string
	for i := 0; i < 256; i++ {
		stripes = append(stripes, fmt.Sprintf("thread-%02x.lock", i))
	}
	cases := []struct {
		name  string
		locks []string
		args  []string
		what  string
	}{
		{"thread", stripes, []string{"reply", "--from", "boss", "--to", "X", "--thread", tid, "--kind", "progress", "--summary", "s"}, "thread " + tid},
		{"idempotency", []string{"idem.lock"}, []string{"send", "--from", "boss", "--to", "X", "--subject", "new", "--idempotency-key", "k1"}, "idempotency records"},
		{"event log", []string{"events.lock"}, []string{"send", "--from", "boss", "--to", "X", "--subject", "new"}, "event log"},
		{"flush", []string{"flush.lock"}, []string{"send", "--from", "boss", "--to", "X", "--subject", "new"}, "event log's flush"},
		{"teams", []string{"teams.lock"}, []string{"team", "create", "t1", "--member", "X"}, "teams"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pid := stoppedHolder(t, db, c.locks...)
			start := time.Now()
			code, v, out := run(c.args...)
			if code != 50 {
				t.Fatalf("exit %d, want 50: %s", code, out)
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("gave up after %s, want about the 1 s lock timeout", took)
			}
			e, _ := v["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if e["code"] != "lock_timeout" || !strings.Contains(msg, c.what) ||
				!strings.Contains(msg, fmt.Sprintf("process %d", pid)) || !strings.Contains(msg, "stopped") {
				t.Fatalf("error should be lock_timeout naming the %s lock and stopped process %d: %s", c.what, pid, out)
			}
		})
	}
	// With every holder gone the same commands succeed.
	if code, _, out := run("reply", "--from", "boss", "--to", "X", "--thread", tid, "--kind", "progress", "--summary", "s"); code != 0 {
		t.Fatalf("reply after the holders left: exit %d: %s", code, out)
	}
	if code, _, out := run("fsck"); code != 0 {
		t.Fatalf("fsck: exit %d: %s", code, out)
	}
}

// TestLockTimeoutFlag: --lock-timeout and INBOX_LOCK_TIMEOUT refuse what
// is not a positive duration, naming the flag.
func TestLockTimeoutFlag(t *testing.T) {
	db, _ := newStore(t, 1)
	for _, bad := range []string{"soon", "0", "-3s"} {
		cmd := exec.Command(testproc.Installed(t, "inbox"), "--db", db, "--json", "list", "--lock-timeout", bad)
		out, err := cmd.Output()
		if code, _ := exitStatus(err); code != 30 || !strings.Contains(string(out), `"field":"lock-timeout"`) {
			t.Errorf("--lock-timeout %s: exit %d, %s; want 30 naming the flag", bad, code, out)
		}
	}
	cmd := exec.Command(testproc.Installed(t, "inbox"), "--db", db, "list")
	cmd.Env = append(os.Environ(), "INBOX_LOCK_TIMEOUT=45")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("INBOX_LOCK_TIMEOUT=45: %v: %s", err, out)
	}
}

// TestClaimInterrupted: SIGINT to a claim blocked on a thread's lock that
// another (stopped) process holds ends it at once with exit 130 and
// "interrupted":true (SPEC §7 Interrupts), not after --lock-timeout.
func TestClaimInterrupted(t *testing.T) {
	db, ids := newStore(t, 1)
	var stripes []string
	for i := 0; i < 256; i++ {
		stripes = append(stripes, fmt.Sprintf("thread-%02x.lock", i))
	}
	stoppedHolder(t, db, stripes...)
	cmd := exec.Command(testproc.Installed(t, "inbox"), "--db", db, "--json", "--lock-timeout", "10m", "claim", "--agent", "X", "--thread", ids[0])
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	// The claim is blocked once the kernel lists its flock request as
	// waiting ("->") in /proc/locks.
	pid := cmd.Process.Pid
	deadline := time.Now().Add(30 * time.Second)
	for !flockWaiting(t, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("claim %d never waited for the lock: %s%s", pid, stdout.String(), stderr.String())
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	cmd.Process.Signal(os.Interrupt)
	code, err := exitStatus(cmd.Wait())
	if err != nil {
		t.Fatal(err)
	}
	if code != 130 {
		t.Fatalf("exit %d, want 130: %s%s", code, stdout.String(), stderr.String())
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("claim took %s to end after SIGINT", took)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(stdout.String()), &v); err != nil || v["interrupted"] != true || v["ok"] != false {
		t.Fatalf("want ok:false, interrupted:true: %s (%v)", stdout.String(), err)
	}
	if e, _ := v["error"].(map[string]any); e["code"] != "interrupted" {
		t.Errorf("error code %v, want interrupted", e["code"])
	}
}

// flockWaiting reports whether /proc/locks shows process pid waiting for
// an flock.
func flockWaiting(t *testing.T, pid int) bool {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skip("no /proc/locks:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// "12: -> FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
		f := strings.Fields(line)
		if len(f) > 5 && f[1] == "->" && f[2] == "FLOCK" && f[5] == fmt.Sprint(pid) {
			return true
		}
	}
	return false
}
