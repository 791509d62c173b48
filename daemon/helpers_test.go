package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/daemon"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// running is a daemon running in this process until the test ends.
type running struct {
	s   *spool.Store
	db  string
	dir string // the intake directory
	log *records
	// stop stops the daemon (once; the test's end does it otherwise),
	// failing the test if Run returned an error.
	stop func()
}

// newStore makes a fresh store for a daemon; its intake directory is
// db/intake.
func newStore(tb testing.TB) (*spool.Store, string) {
	tb.Helper()
	return storetest.New(tb, spool.Options{Source: "daemon"})
}

// startDaemon runs a daemon on a fresh store.
func startDaemon(tb testing.TB) *running {
	tb.Helper()
	s, db := newStore(tb)
	return start(tb, s, db, 0)
}

// start runs a daemon on store s at db (a sweep of 0 is the default
// safety-net interval) and returns once it says it has started: its
// intake directory is there and watched, and what was in it is done.
func start(tb testing.TB, s *spool.Store, db string, sweep time.Duration) *running {
	tb.Helper()
	r := &running{s: s, db: db, dir: filepath.Join(db, "intake"), log: newRecords()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{Store: s, Intake: r.dir, IntakeTo: "coordinator", Sweep: sweep,
			Log: slog.New(r.log)})
	}()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Error(err)
			}
			if tb.Failed() {
				tb.Logf("daemon log:\n%s", r.log)
			}
		})
	}
	tb.Cleanup(r.stop)
	r.log.wait(tb, 1, "daemon started")
	return r
}

// processed waits for the daemon to say that it dispatched descriptor
// name: its .result is in place and it is name.processed.
func (r *running) processed(tb testing.TB, name string) {
	tb.Helper()
	r.log.wait(tb, 1, "descriptor dispatched", fmt.Sprintf("file=%q", name))
}

// records is a daemon's log as a test reads it: one line per record
// ("LEVEL message key=value…", string values quoted), and a signal for
// every new one to wait on.
type records struct {
	mu    sync.Mutex
	lines []string
	grew  chan struct{} // closed, and replaced, when a record is added
}

func newRecords() *records { return &records{grew: make(chan struct{})} }

func (l *records) Enabled(context.Context, slog.Level) bool { return true }
func (l *records) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *records) WithGroup(string) slog.Handler            { return l }

func (l *records) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() == slog.KindString {
			fmt.Fprintf(&b, " %s=%q", a.Key, a.Value.String())
		} else {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, b.String())
	close(l.grew)
	l.grew = make(chan struct{})
	return nil
}

// count returns how many records contain every one of parts, and the
// channel that is closed at the next record.
func (l *records) count(parts ...string) (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if containsAll(line, parts) {
			n++
		}
	}
	return n, l.grew
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// wait waits for n records that contain every one of parts, failing the
// test after 10 s without one.
func (l *records) wait(tb testing.TB, n int, parts ...string) {
	tb.Helper()
	got, seen := 0, 0
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		was := got
		for ; seen < len(l.lines); seen++ {
			if containsAll(l.lines[seen], parts) {
				got++
			}
		}
		grew := l.grew
		l.mu.Unlock()
		if got >= n {
			return
		}
		if got > was {
			timeout.Reset(10 * time.Second)
		}
		select {
		case <-grew:
		case <-timeout.C:
			tb.Fatalf("the daemon logged %q %d times, want %d; nothing more in 10 s", parts, got, n)
		}
	}
}

// String returns the whole log.
func (l *records) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
