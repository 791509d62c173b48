package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
)

// Following presence (SPEC §15): a dashboard learns without polling that
// a wait began or ended, which no event records.

// PresenceCalls follows b's presence for the test: a value comes on the
// channel after each call of FollowPresence's fn (calls that come while
// one is pending are merged into it). It returns once the follower is
// armed, and stops it when the test ends, checking it returned nil.
func PresenceCalls(t *testing.T, b inbox.Bus, opt inbox.WaitOptions) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	calls := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- b.FollowPresence(ctx, opt, func() {
			select {
			case calls <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("FollowPresence returned %v when its context ended", err)
		}
	})
	select {
	case <-calls: // armed
	case err := <-done:
		t.Fatalf("FollowPresence returned %v before its first call", err)
	case <-time.After(10 * time.Second):
		t.Fatal("FollowPresence did not call fn once armed within 10 s")
	}
	return calls
}

// AwaitPresence waits for calls from PresenceCalls until check, made
// after each call, returns true: a change must be followed by a call
// after which readers see it. It fails after 10 s.
func AwaitPresence(t *testing.T, calls <-chan struct{}, what string, check func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-calls:
		case <-deadline:
			t.Fatalf("%s: no call of FollowPresence's fn after which it shows, within 10 s", what)
		}
		if check() {
			return
		}
	}
}

// StateOf is agent's state as Agents says, "" when it is not listed.
func StateOf(t *testing.T, b inbox.Bus, agent string) string {
	t.Helper()
	if a := agentNamed(t, b, agent); a != nil {
		return a.State
	}
	return ""
}

// WaitsOf counts the waits in progress Waits lists for agent ("" for
// every agent).
func WaitsOf(t *testing.T, b inbox.Bus, agent string) int {
	t.Helper()
	n := 0
	for _, w := range ok(b.Waits(t.Context()))(t) {
		if agent == "" || w.Agent == agent {
			n++
		}
	}
	return n
}

func testFollowPresence(t *testing.T, b inbox.Bus) {
	ctx := t.Context()
	calls := PresenceCalls(t, b, inbox.WaitOptions{})
	waitsOf := func(agent string) int { return WaitsOf(t, b, agent) }
	state := func(agent string) string { return StateOf(t, b, agent) }

	// A wait on someone: its start and its end.
	release := b.WaitingOn(ctx, inbox.WaitInfo{Agent: "r", Reason: inbox.WaitOnReceive, From: "s"})
	AwaitPresence(t, calls, "a receive that began", func() bool { return waitsOf("r") == 1 && state("r") == inbox.StateWaiting })
	release()
	AwaitPresence(t, calls, "a receive that ended", func() bool { return waitsOf("r") == 0 && state("r") != inbox.StateWaiting })

	// A plain wait (an MCP session), by an agent seen for the first time.
	release = b.Waiting(ctx, "session")
	AwaitPresence(t, calls, "a session that began", func() bool { return state("session") == inbox.StateWaiting })
	release()
	AwaitPresence(t, calls, "a session that ended", func() bool { return state("session") != inbox.StateWaiting })

	// Two waits of one agent: the end of one is a call too, and the agent
	// waits on until the second ends.
	r1 := b.WaitingOn(ctx, inbox.WaitInfo{Agent: "w", Reason: inbox.WaitForReply, ThreadID: "t1"})
	r2 := b.WaitingOn(ctx, inbox.WaitInfo{Agent: "w", Reason: inbox.WaitForReply, ThreadID: "t2"})
	AwaitPresence(t, calls, "two waits that began", func() bool { return waitsOf("w") == 2 })
	r1()
	AwaitPresence(t, calls, "one of two waits that ended", func() bool { return waitsOf("w") == 1 && state("w") == inbox.StateWaiting })
	r2()
	AwaitPresence(t, calls, "the second wait that ended", func() bool { return waitsOf("w") == 0 && state("w") != inbox.StateWaiting })
}
