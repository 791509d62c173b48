package daemon_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/daemon"
)

// failingStart is a bus whose event log cannot be read: the first step of
// a daemon's start fails, as a NATS read does when its context ends.
type failingStart struct {
	inbox.Bus
	err func(ctx context.Context) error
}

func (b failingStart) LastEventID(ctx context.Context) (int64, error) { return 0, b.err(ctx) }

// TestStopWhileStarting: a daemon stopped while it starts (its context
// ends and a step of the start fails for that reason) stops cleanly, as a
// SIGINT to `inbox daemon` must; a step that fails on its own is still an
// error.
func TestStopWhileStarting(t *testing.T) {
	s, db := newStore(t)
	cfg := daemon.Config{Intake: filepath.Join(db, "intake"), IntakeTo: "coordinator"}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	cfg.Store = failingStart{s, func(ctx context.Context) error { return inbox.Storage(ctx.Err(), "read the event log") }}
	if err := daemon.Run(ctx, cfg); err != nil {
		t.Fatalf("stopped while starting: %v, want a clean stop", err)
	}

	broken := errors.New("disk on fire")
	cfg.Store = failingStart{s, func(context.Context) error { return inbox.Storage(broken, "read the event log") }}
	if err := daemon.Run(t.Context(), cfg); !errors.Is(err, broken) {
		t.Fatalf("start failed on its own: %v, want %v", err, broken)
	}
}
