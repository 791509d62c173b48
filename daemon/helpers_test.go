package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/daemon"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// startDaemon runs a daemon in this process on a fresh store.
func startDaemon(tb testing.TB) (intakeDir string, stop func()) {
	tb.Helper()
	s, db := storetest.New(tb, spool.Options{Source: "daemon"})
	intakeDir = filepath.Join(db, "intake")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, daemon.Config{Store: s, Intake: intakeDir, IntakeTo: "coordinator"}) }()
	for i := 0; i < 500; i++ { // the daemon creates the intake directory
		if _, err := os.Stat(intakeDir); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return intakeDir, func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	}
}
