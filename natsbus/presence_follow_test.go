package natsbus_test

import (
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/bustest"
	"github.com/inbox-dev/inbox/internal/natstest"
	"github.com/inbox-dev/inbox/natsbus"
)

// A waiter whose connection ends while it waits (its process killed)
// leaves its key behind: the follower tells of that too, for a wait on
// someone and for a plain one, and keeps telling of the agent's next wait.
func TestFollowPresence(t *testing.T) {
	srv := natstest.Start(t)
	db := natstest.Store(srv, "presence")
	b := create(t, db)
	calls := bustest.PresenceCalls(t, b, inbox.WaitOptions{})
	state := func(agent string) string { return bustest.StateOf(t, b, agent) }
	waits := func() int { return bustest.WaitsOf(t, b, "") }
	// waiter is another process's connection to the store.
	waiter := func() *natsbus.Bus {
		w, err := natsbus.Open(t.Context(), db, natsbus.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w
	}

	w := waiter()
	w.WaitingOn(t.Context(), inbox.WaitInfo{Agent: "doomed", Reason: inbox.WaitOnReceive, From: "boss"})
	bustest.AwaitPresence(t, calls, "a wait on someone", func() bool { return state("doomed") == inbox.StateWaiting && waits() == 1 })
	w.Close()
	bustest.AwaitPresence(t, calls, "its waiter killed", func() bool { return state("doomed") == inbox.StateGone && waits() == 0 })

	w = waiter()
	w.Waiting(t.Context(), "session")
	bustest.AwaitPresence(t, calls, "a session", func() bool { return state("session") == inbox.StateWaiting })
	w.Close()
	bustest.AwaitPresence(t, calls, "its process killed", func() bool { return state("session") == inbox.StateGone })

	// The agent is back, and gone again.
	w = waiter()
	w.Waiting(t.Context(), "session")
	bustest.AwaitPresence(t, calls, "the session back", func() bool { return state("session") == inbox.StateWaiting })
	w.Close()
	bustest.AwaitPresence(t, calls, "its process killed again", func() bool { return state("session") == inbox.StateGone })
}
