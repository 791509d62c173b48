package cli

// Setup and helpers that the process tests of this package share: the
// binaries testscript.Main installs, a seeded store, running commands and
// reading what they print.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// newStore creates a store with n threads for agent X and returns its path
// and the thread ids.
func newStore(t *testing.T, n int) (string, []string) {
	t.Helper()
	s, db := storetest.New(t, spool.Options{})
	var ids []string
	for i := 0; i < n; i++ {
		r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "X", Subject: fmt.Sprintf("task %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Thread.ThreadID)
	}
	return db, ids
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// exitStatus is the exit status that ended a command from the error its
// run returned (nil is 0), or an error when it ended without one: it did
// not start, was killed by a signal, or the script timed out.
func exitStatus(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if code := ee.ExitCode(); code >= 0 {
			return code, nil
		}
		return -1, fmt.Errorf("no exit status: %v", err)
	}
	return -1, err
}

// procOut is what a command run by runConcurrently left: its stdout and
// stderr, and the error its Wait returned.
type procOut struct {
	stdout, stderr bytes.Buffer
	err            error
}

// runConcurrently starts every command at once (failing t if one cannot
// start) and waits for all of them to exit.
func runConcurrently(t *testing.T, cmds []*exec.Cmd) []procOut {
	t.Helper()
	outs := make([]procOut, len(cmds))
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		cmd.Stdout, cmd.Stderr = &outs[i].stdout, &outs[i].stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i].err = cmd.Wait()
		}()
	}
	wg.Wait()
	return outs
}

// startPiped starts cmd with the pipe that pipe (its StdoutPipe or
// StderrPipe) makes, failing t if it cannot, and kills it when t ends.
func startPiped(t *testing.T, cmd *exec.Cmd, pipe func() (io.ReadCloser, error)) io.ReadCloser {
	t.Helper()
	r, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return r
}

// claimRace runs one inbox-test-helper claim process for each agent, all
// at once, each claiming the threads ids of the store at db in the same
// order, and fails t unless every process exits 0. Each prints a line
// "<thread id> <exit code>" for every claim.
func claimRace(t *testing.T, db string, ids, agents []string) []procOut {
	t.Helper()
	list := filepath.Join(t.TempDir(), "threads")
	if err := os.WriteFile(list, []byte(strings.Join(ids, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	helper := testproc.Installed(t, "inbox-test-helper")
	cmds := make([]*exec.Cmd, len(agents))
	for p := range cmds {
		cmds[p] = exec.Command(helper, "claim", db, agents[p], list)
	}
	outs := runConcurrently(t, cmds)
	for _, o := range outs {
		if o.err != nil {
			t.Fatalf("%v: %s", o.err, o.stderr.String())
		}
	}
	return outs
}

// cliOut is the part of a write's --json output the tests read.
type cliOut struct {
	Thread struct {
		ThreadID string `json:"thread_id"`
	} `json:"thread"`
	Message struct {
		MessageID string `json:"message_id"`
	} `json:"message"`
	Lease struct {
		LeaseToken int64 `json:"lease_token"`
	} `json:"lease"`
}

// intakeResult is the part of a descriptor's .result file the tests read.
type intakeResult struct {
	OK       bool   `json:"ok"`
	ThreadID string `json:"thread_id"`
}

// eventsByMessage walks the store's whole event log, reporting to t an
// event id that does not increase. It returns the last event id and, per
// message id, how many of the events that counts accepts carry it.
func eventsByMessage(t *testing.T, s *spool.Store, counts func(*inbox.Event) bool) (last int64, perMsg map[string]int) {
	t.Helper()
	perMsg = map[string]int{}
	err := s.Events(t.Context(), 0, func(ev *inbox.Event) bool {
		if ev.EventID <= last {
			t.Errorf("event id %d after %d", ev.EventID, last)
		}
		last = ev.EventID
		if counts(ev) {
			perMsg[ev.MessageID]++
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return last, perMsg
}
