package bustest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/bustest"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

func openSpool(t *testing.T) inbox.Bus {
	s, _ := storetest.New(t, spool.Options{})
	return s
}

// twoWinners grants a claim that should have lost.
type twoWinners struct{ inbox.Bus }

func (b twoWinners) Claim(ctx context.Context, agent, tid string, secs int) (*inbox.Result, error) {
	r, err := b.Bus.Claim(ctx, agent, tid, secs)
	if errors.Is(err, inbox.ErrLeaseConflict) {
		th, terr := b.Bus.Thread(ctx, tid)
		if terr != nil {
			return nil, err
		}
		return &inbox.Result{Thread: th, Lease: &inbox.Lease{ThreadID: tid, AgentID: agent, LeaseToken: 1}}, nil
	}
	return r, err
}

// lostWakeup looks once and then sleeps out the timeout: an answer that
// lands while it waits is never seen.
type lostWakeup struct{ inbox.Bus }

func (b lostWakeup) WaitReply(ctx context.Context, tid string, cur inbox.ReplyCursor, f inbox.ReplyFilter, opt inbox.WaitOptions) (*inbox.WaitResult, error) {
	once := opt
	once.Timeout = 0
	w, err := b.Bus.WaitReply(ctx, tid, cur, f, once)
	if err != nil || w.Woke {
		return w, err
	}
	select {
	case <-time.After(opt.Timeout):
	case <-ctx.Done():
	}
	return w, nil
}

var broken = map[string]func(inbox.Bus) inbox.Bus{
	"two-winners": func(b inbox.Bus) inbox.Bus { return twoWinners{b} },
	"lost-wakeup": func(b inbox.Bus) inbox.Bus { return lostWakeup{b} },
}

// TestBrokenBackendHelper runs the suite on a broken double when the
// test binary is started by TestSuiteCatchesBrokenBackends; otherwise it
// returns at once.
func TestBrokenBackendHelper(t *testing.T) {
	kind := os.Getenv("BUSTEST_BROKEN")
	if kind == "" {
		return
	}
	bustest.Run(t, func(t *testing.T) inbox.Bus { return broken[kind](openSpool(t)) })
}

// TestSuiteCatchesBrokenBackends: the suite fails a backend that grants
// two claims, and one that loses a wake-up, in the check meant for each.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	for kind, check := range map[string]string{"two-winners": "ClaimIsAtomic", "lost-wakeup": "WaitReplyNoLostWakeup"} {
		t.Run(kind, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenBackendHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "BUSTEST_BROKEN="+kind)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a backend with a %s bug:\n%s", kind, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenBackendHelper/"+check) {
				t.Errorf("the %s bug was not caught by %s:\n%s", kind, check, out)
			}
		})
	}
}
