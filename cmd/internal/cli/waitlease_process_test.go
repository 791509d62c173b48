package cli

// A holder's own wait keeps its lease (SPEC §4), with real processes on
// both backends: a worker blocked in wait-reply three times its lease
// length still holds its thread when the answer comes, and one killed
// while it waits loses it when the lease runs out.

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/natstest"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/natsbus"
	"github.com/inbox-dev/inbox/spool"
)

// onBothBackends runs test on a directory store and on a NATS store; b
// is the store opened in this process, env what a command needs to reach
// it (INBOX_DB among them).
func onBothBackends(t *testing.T, test func(t *testing.T, b inbox.Bus, env []string)) {
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INBOX_") {
			base = append(base, kv)
		}
	}
	base = slices.Clip(base) // each backend appends its own
	t.Run("dir", func(t *testing.T) {
		t.Parallel()
		s, db := storetest.New(t, spool.Options{})
		test(t, s, append(base, "INBOX_DB="+db))
	})
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		srv := natstest.Start(t)
		db := natstest.Store(srv, "waitlease")
		b, err := natsbus.Open(t.Context(), db, natsbus.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		test(t, b, append(base, "INBOX_DB="+db, "INBOX_TEST_NATS="+srv.ClientURL(), "INBOX_TEST_DIRS=1"))
	})
}

// leaseCLI runs inbox commands with env and returns stdout and the exit
// code, failing t when a command cannot run.
func leaseCLI(t *testing.T, env []string) func(args ...string) (string, int) {
	bin := testproc.Installed(t, "inbox")
	return func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--json")...)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		rc, err := exitStatus(err)
		if err != nil {
			t.Fatalf("inbox %s: %v; stderr: %s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out), rc
	}
}

// blockedThread makes a thread that agent w claimed for secs seconds
// (token 1) and is blocked on, and returns its id.
func blockedThread(t *testing.T, run func(args ...string) (string, int), secs string) string {
	t.Helper()
	out, rc := run("send", "--from", "leader", "--to", "w", "--subject", "Add post CRUD routes")
	if rc != 0 {
		t.Fatalf("send: rc %d %s", rc, out)
	}
	var sent struct {
		Thread inbox.Thread `json:"thread"`
	}
	if err := json.Unmarshal([]byte(out), &sent); err != nil {
		t.Fatalf("send's output %q: %v", out, err)
	}
	tid := sent.Thread.ThreadID
	if out, rc := run("claim", "--agent", "w", "--thread", tid, "--lease-seconds", secs); rc != 0 || !strings.Contains(out, `"lease_token":1`) {
		t.Fatalf("claim: rc %d %s, want 0 with token 1", rc, out)
	}
	if out, rc := run("update", "--agent", "w", "--thread", tid, "--lease-token", "1", "--status", "blocked", "--summary", "Need auth decision"); rc != 0 {
		t.Fatalf("blocked update: rc %d %s", rc, out)
	}
	return tid
}

// renewals counts the lease_renewed events of thread tid.
func renewals(t *testing.T, b inbox.Bus, tid string) int {
	t.Helper()
	n := 0
	err := b.Events(t.Context(), 0, func(ev *inbox.Event) bool {
		if ev.ThreadID == tid && ev.EventType == inbox.EventLeaseRenewed {
			n++
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHolderWaitKeepsLease: the holder of a 2 s lease waits in
// wait-reply --agent (seed 000's loop: 900 s lease, 1800 s wait, scaled
// down); the answer comes after three lease lengths and wakes it, and the
// holder's done with its token is accepted. Its wait renewed the lease at
// most once per third of its length.
func TestHolderWaitKeepsLease(t *testing.T) {
	onBothBackends(t, func(t *testing.T, b inbox.Bus, env []string) {
		const secs = 2
		lease := secs * time.Second
		run := leaseCLI(t, env)
		claimed := time.Now()
		tid := blockedThread(t, run, "2")
		waiter := exec.Command(testproc.Installed(t, "inbox"), "wait-reply", "--agent", "w", "--thread", tid, "--timeout-seconds", "60", "--json")
		waiter.Env = env
		var stderr strings.Builder
		waiter.Stderr = &stderr
		pipe := startPiped(t, waiter, waiter.StdoutPipe)
		exited := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(pipe)
			var out strings.Builder
			for sc.Scan() {
				out.WriteString(sc.Text())
			}
			exited <- out.String()
		}()
		// Three lease lengths pass with the worker waiting.
		select {
		case out := <-exited:
			t.Fatalf("wait-reply returned before any answer: %s; stderr: %s", out, stderr.String())
		case <-time.After(time.Until(claimed.Add(3 * lease))):
		}
		if out, rc := run("reply", "--from", "leader", "--thread", tid, "--kind", "answer", "--summary", "Use email/password for MVP"); rc != 0 {
			t.Fatalf("the leader's answer: rc %d %s", rc, out)
		}
		var out string
		select {
		case out = <-exited:
		case <-time.After(20 * time.Second):
			t.Fatal("wait-reply did not wake for the answer")
		}
		code, err := exitStatus(waiter.Wait())
		if err != nil || code != 0 || !strings.Contains(out, "Use email/password for MVP") {
			t.Fatalf("wait-reply: exit %d (%v) %s; stderr: %s", code, err, out, stderr.String())
		}
		if out, rc := run("done", "--agent", "w", "--thread", tid, "--lease-token", "1", "--summary", "Post CRUD implemented"); rc != 0 {
			t.Fatalf("the holder's done with its token after %v waiting on a %v lease: rc %d %s", time.Since(claimed), lease, rc, out)
		}
		took := time.Since(claimed)
		if n, most := renewals(t, b, tid), int(took/(lease/3)); n == 0 || n > most {
			t.Errorf("%v of waiting renewed a %v lease %d times, want 1 to %d (one renew per third of the lease at most)", took, lease, n, most)
		}
	})
}

// TestKilledWaiterLeaseLapses: a holder killed (SIGKILL) while its
// wait-reply renews its lease renews it no more, and the lease runs out
// as any other: another agent's claim then takes the thread and the old
// holder is fenced out (20).
func TestKilledWaiterLeaseLapses(t *testing.T) {
	onBothBackends(t, func(t *testing.T, b inbox.Bus, env []string) {
		run := leaseCLI(t, env)
		tid := blockedThread(t, run, "2")
		start, err := b.LastEventID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		waiter := exec.Command(testproc.Installed(t, "inbox"), "wait-reply", "--agent", "w", "--thread", tid, "--timeout-seconds", "60", "--json")
		waiter.Env = env
		testproc.Start(t, waiter)
		// The waiter renews: its first renewal is in the log.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		renewed := false
		b.Follow(ctx, start, tid, inbox.WaitOptions{}, func(ev *inbox.Event) bool {
			renewed = ev.EventType == inbox.EventLeaseRenewed
			return !renewed
		})
		if !renewed {
			t.Fatal("the holder's wait-reply never renewed its lease")
		}
		waiter.Process.Kill()
		waiter.Wait()
		before := renewals(t, b, tid)
		v, err := b.Show(t.Context(), tid)
		if err != nil {
			t.Fatal(err)
		}
		expires, err := inbox.ParseTime(v.Lease.ExpiresAt)
		if err != nil {
			t.Fatal(err)
		}
		// The lease runs out at its expiry, and nothing renews it.
		time.Sleep(time.Until(expires.Add(100 * time.Millisecond)))
		if out, rc := run("claim", "--agent", "b", "--thread", tid); rc != 0 || !strings.Contains(out, `"lease_token":2`) {
			t.Fatalf("another agent's claim after the killed waiter's lease ran out: rc %d %s, want 0 with token 2", rc, out)
		}
		if out, rc := run("done", "--agent", "w", "--thread", tid, "--lease-token", "1", "--summary", "late"); rc != 20 {
			t.Errorf("the killed holder's done: rc %d %s, want 20", rc, out)
		}
		if after := renewals(t, b, tid); after != before {
			t.Errorf("%d renewals after the waiter was killed", after-before)
		}
	})
}
