package spool_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/bustest"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestPresenceWaiterHelper is a waiter for TestFollowPresence: started
// as a child with SPOOL_WAITER_DB set, it registers a wait on that store,
// says so on stdout and blocks until it is killed. Otherwise it returns.
func TestPresenceWaiterHelper(t *testing.T) {
	db := os.Getenv("SPOOL_WAITER_DB")
	if db == "" {
		return
	}
	s, err := spool.Open(t.Context(), db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.WaitingOn(t.Context(), inbox.WaitInfo{Agent: "doomed", Reason: inbox.WaitOnReceive, From: "boss"})
	os.Stdout.WriteString("waiting\n")
	select {}
}

// startWaiter starts a child process that waits for "doomed" on db and
// returns once its wait is registered.
func startWaiter(t *testing.T, db string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPresenceWaiterHelper$")
	cmd.Env = append(os.Environ(), "SPOOL_WAITER_DB="+db)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "waiting\n" {
		t.Fatalf("the waiter said %q (%v), want waiting", line, err)
	}
	return cmd
}

// A waiter that is killed while it waits leaves its presence file behind
// with its lock dropped: the follower tells of that too, with inotify and
// when it polls, and on a store where no one has waited yet.
func TestFollowPresence(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  inbox.WaitOptions
	}{
		{"inotify", inbox.WaitOptions{}},
		{"poll", inbox.WaitOptions{ForcePoll: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, db := storetest.New(t, spool.Options{})
			// No presence/ yet: it appears with the first wait.
			if err := os.RemoveAll(filepath.Join(db, "presence")); err != nil {
				t.Fatal(err)
			}
			var fellBack error
			opt := tc.opt
			opt.OnFallback = func(reason error) { fellBack = reason }
			calls := bustest.PresenceCalls(t, s, opt)
			if (fellBack != nil) != tc.opt.ForcePoll {
				t.Errorf("fallback %v with ForcePoll %v", fellBack, tc.opt.ForcePoll)
			}
			state := func() string { return bustest.StateOf(t, s, "doomed") }
			waits := func() int { return bustest.WaitsOf(t, s, "") }
			cmd := startWaiter(t, db)
			bustest.AwaitPresence(t, calls, "a wait in another process", func() bool { return state() == inbox.StateWaiting && waits() == 1 })
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			bustest.AwaitPresence(t, calls, "a waiter killed", func() bool { return state() == inbox.StateGone && waits() == 0 })
			// Its file is still there: the next wait of the agent sweeps
			// it, and that is a call too.
			release := s.Waiting(t.Context(), "doomed")
			bustest.AwaitPresence(t, calls, "the agent back", func() bool { return state() == inbox.StateWaiting })
			release()
			bustest.AwaitPresence(t, calls, "the agent's wait ended", func() bool { return state() == inbox.StateIdle })
		})
	}
}
