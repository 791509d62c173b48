package cli

// Concurrency tests with real processes: several OS processes race on one
// store, so the flocks, renames and appends are exercised across process
// boundaries, not just goroutines.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// helperMain is the "inbox-test-helper" command: a long-lived worker that
// calls the store directly, so that a race between many processes does not
// spend its time starting thousands of them.
//
//	inbox-test-helper claim DB AGENT THREADS_FILE   prints "THREAD EXIT" per thread
func helperMain() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "lin" {
		linHelper(context.TODO(), args[1:])
		return
	}
	if len(args) > 0 && args[0] == "holdlock" {
		holdLockHelper(args[1:])
		return
	}
	if len(args) > 0 && args[0] == "emit" {
		emitHelper()
		return
	}
	if len(args) != 4 || args[0] != "claim" {
		fmt.Fprintln(os.Stderr, "usage: inbox-test-helper claim DB AGENT THREADS_FILE")
		os.Exit(2)
	}
	s, err := spool.Open(context.TODO(), args[1], spool.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(50)
	}
	data, err := os.ReadFile(args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(50)
	}
	w := bufio.NewWriter(os.Stdout)
	for _, tid := range strings.Fields(string(data)) {
		_, err := s.Claim(context.TODO(), args[2], tid, 900)
		fmt.Fprintf(w, "%s %d\n", tid, exitCode(err))
	}
	w.Flush()
}

// TestClaimRaceProcesses: 16 processes claim the same 200 threads in the
// same order; every thread must have exactly one winner, every loser must
// get a lease conflict, and the store must agree with the winners.
func TestClaimRaceProcesses(t *testing.T) {
	const procs, threads = 16, 200
	db, ids := newStore(t, threads)
	agents := make([]string, procs)
	for p := range agents {
		agents[p] = fmt.Sprintf("w%d", p)
	}
	outs := claimRace(t, db, ids, agents)
	winners := map[string][]string{}
	codes := map[string]int{}
	for p := range outs {
		sc := bufio.NewScanner(&outs[p].stdout)
		for sc.Scan() {
			var tid, code string
			fmt.Sscan(sc.Text(), &tid, &code)
			codes[code]++
			if code == "0" {
				winners[tid] = append(winners[tid], fmt.Sprintf("w%d", p))
			}
		}
	}
	if codes["0"] != threads || codes["20"] != threads*(procs-1) || len(codes) != 2 {
		t.Errorf("exit codes %v, want 0: %d and 20: %d", codes, threads, threads*(procs-1))
	}
	s, err := spool.Open(t.Context(), db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range ids {
		w := winners[tid]
		if len(w) != 1 {
			t.Errorf("thread %s: %d winners %v, want exactly 1", tid, len(w), w)
			continue
		}
		v, err := s.Show(t.Context(), tid)
		if err != nil {
			t.Fatal(err)
		}
		if v.Thread.Status != inbox.StatusClaimed || v.Thread.AssignedTo != w[0] || v.Lease.AgentID != w[0] || v.Lease.LeaseToken != 1 {
			t.Errorf("thread %s: status %s assigned %s lease %+v, want claimed by %s with token 1",
				tid, v.Thread.Status, v.Thread.AssignedTo, v.Lease, w[0])
		}
	}
}

// TestConcurrentSendsOneThread: 8 processes each run `inbox send` 50 times
// into one thread; all 400 messages must be there once, in a contiguous
// sequence, each with its own event, and event ids strictly increasing.
func TestConcurrentSendsOneThread(t *testing.T) {
	const procs, each = 8, 50
	db, ids := newStore(t, 1)
	tid := ids[0]
	bin := testproc.Installed(t, "inbox")
	var mu sync.Mutex
	sent := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, procs*each)
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				out, err := exec.Command(bin, "send", "--db", db, "--json", "--thread", tid,
					"--from", fmt.Sprintf("w%d", p), "--kind", "progress", "--body", fmt.Sprintf("w%d message %d", p, i)).Output()
				if err != nil {
					errs <- fmt.Errorf("send: %v: %s", err, out)
					return
				}
				var r cliOut
				if err := json.Unmarshal(out, &r); err != nil || r.Message.MessageID == "" {
					errs <- fmt.Errorf("send printed %q", out)
					return
				}
				mu.Lock()
				sent[r.Message.MessageID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(sent) != procs*each {
		t.Fatalf("%d distinct message ids acknowledged, want %d", len(sent), procs*each)
	}
	s, err := spool.Open(t.Context(), db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Show(t.Context(), tid)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Messages) != procs*each+1 {
		t.Fatalf("thread has %d messages, want %d", len(v.Messages), procs*each+1)
	}
	seen := map[string]bool{}
	for i, m := range v.Messages {
		if m.Seq != i+1 {
			t.Errorf("message %d has seq %d", i+1, m.Seq)
		}
		if seen[m.MessageID] {
			t.Errorf("message %s appears twice", m.MessageID)
		}
		seen[m.MessageID] = true
		if i > 0 && sent[m.MessageID] != 1 {
			t.Errorf("message %s in the thread was not acknowledged to a sender", m.MessageID)
		}
	}
	last, events := eventsByMessage(t, s, func(ev *inbox.Event) bool { return ev.MessageID != "" })
	for id := range seen {
		if events[id] != 1 {
			t.Errorf("message %s has %d events, want 1", id, events[id])
		}
	}
	if last != int64(procs*each+1) {
		t.Errorf("last event id %d, want %d", last, procs*each+1)
	}
}

// TestLeaseExpiryFencesOldHolder: a 1 s lease expires, another agent claims
// the thread, and the old holder's done is refused with exit 20.
func TestLeaseExpiryFencesOldHolder(t *testing.T) {
	db, ids := newStore(t, 1)
	tid := ids[0]
	bin := testproc.Installed(t, "inbox")
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append([]string{"--db", db, "--json"}, args...)...)
		out, err := cmd.Output()
		rc, err := exitStatus(err)
		if err != nil {
			t.Fatal(err)
		}
		return string(out), rc
	}
	if out, rc := run("claim", "--agent", "A", "--thread", tid, "--lease-seconds", "1"); rc != 0 {
		t.Fatalf("A's claim: rc %d %s", rc, out)
	}
	if out, rc := run("claim", "--agent", "B", "--thread", tid); rc != 20 {
		t.Fatalf("B's claim during A's lease: rc %d %s, want 20", rc, out)
	}
	time.Sleep(1100 * time.Millisecond)
	out, rc := run("claim", "--agent", "B", "--thread", tid)
	if rc != 0 || !strings.Contains(out, `"lease_token":2`) {
		t.Fatalf("B's claim after expiry: rc %d %s, want 0 with token 2", rc, out)
	}
	if out, rc := run("done", "--agent", "A", "--thread", tid, "--summary", "late"); rc != 20 {
		t.Fatalf("A's done after losing the lease: rc %d %s, want 20", rc, out)
	}
	if out, rc := run("done", "--agent", "B", "--thread", tid, "--summary", "stale", "--lease-token", "1"); rc != 20 || !strings.Contains(out, "stale_lease_token") {
		t.Fatalf("B's done with A's token: rc %d %s, want 20 stale_lease_token", rc, out)
	}
	if out, rc := run("done", "--agent", "B", "--thread", tid, "--summary", "ok", "--lease-token", "2"); rc != 0 {
		t.Fatalf("B's done: rc %d %s", rc, out)
	}
}
