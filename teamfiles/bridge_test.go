package teamfiles

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
)

// waitLimit bounds every wait of these tests: a bridge that is working
// gets there far sooner; the bound only turns a hang into a failure.
const waitLimit = 10 * time.Second

// logBuffer collects a bridge's log while it runs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// steps hears the loop of one bridge or more (Config.step): how far it
// has got, and a wake-up at every step, so that a test looks again when
// a bridge has done something rather than after a while.
type steps struct {
	mu   sync.Mutex
	at   progress
	next chan struct{} // closed at the next step
}

func newSteps() *steps { return &steps{next: make(chan struct{})} }

// step is the Config.step hook.
func (s *steps) step(p progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = p
	close(s.next)
	s.next = make(chan struct{})
}

// until waits until cond holds for the progress of the bridge, looking
// again after each of its steps; it fails the test after waitLimit.
func (s *steps) until(t testing.TB, what string, cond func(progress) bool) {
	t.Helper()
	s.within(t, waitLimit, what, cond)
}

// within is until with another limit; it returns how long it waited.
func (s *steps) within(t testing.TB, limit time.Duration, what string, cond func(progress) bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		at, next := s.at, s.next
		s.mu.Unlock()
		if cond(at) {
			return time.Since(start)
		}
		select {
		case <-next:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, limit)
		}
	}
}

// bridgeRun is a bridge running for a test.
type bridgeRun struct {
	*steps
	t    testing.TB
	log  *logBuffer
	stop func()
}

// startBridge runs run (RunJSONL or RunClaude) with cfg (Sweep 200 ms
// unless set, the log in a buffer) until the test ends; it fails the test
// if the bridge does not catch up (a planted FIFO must not hang it).
func startBridge(t testing.TB, run func(context.Context, Config) error, cfg Config) *bridgeRun {
	t.Helper()
	r := &bridgeRun{steps: newSteps(), t: t, log: &logBuffer{}}
	if cfg.Sweep == 0 {
		cfg.Sweep = 200 * time.Millisecond
	}
	cfg.Log = slog.New(slog.NewTextHandler(r.log, nil))
	if also := cfg.step; also != nil {
		cfg.step = func(p progress) { also(p); r.step(p) }
	} else {
		cfg.step = r.step
	}
	ready := make(chan struct{})
	cfg.Ready = ready
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("bridge: %v", err)
	case <-time.After(waitLimit):
		t.Fatalf("the bridge did not catch up within %v (blocked on a planted file?); log:\n%s", waitLimit, r.log)
	}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("bridge: %v", err)
			}
		case <-time.After(waitLimit):
			t.Errorf("the bridge did not stop within %v; log:\n%s", waitLimit, r.log)
		}
	}
	t.Cleanup(r.stop)
	return r
}

// startJSONL runs the seed 002 bridge until the test ends.
func startJSONL(t testing.TB, s inbox.Bus, dir string, maxSize int64) *bridgeRun {
	t.Helper()
	return startBridge(t, RunJSONL, Config{Bus: s, Dir: dir, MaxSize: maxSize})
}

// startClaude runs the Claude Code bridge until the test ends.
func startClaude(t testing.TB, s inbox.Bus, dir string) *bridgeRun {
	t.Helper()
	return startBridge(t, RunClaude, Config{Bus: s, Dir: dir})
}

// eventually waits until cond holds, looking again after each step of
// the bridge's loop (whatever cond looks at, the bridge makes it true).
func (r *bridgeRun) eventually(what string, cond func() bool) {
	r.t.Helper()
	r.until(r.t, what, func(progress) bool { return cond() })
}

// handled waits until the bridge has handled every event of the log so
// far: whatever it would have done about them, it has done.
func (r *bridgeRun) handled(ctx context.Context, s inbox.Bus) {
	r.t.Helper()
	last, err := s.LastEventID(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	r.until(r.t, "the bridge at the last event", func(p progress) bool { return p.Event >= last })
}

// swept waits until the bridge has finished a sweep begun after now: it
// has looked at every file again.
func (r *bridgeRun) swept() {
	r.t.Helper()
	r.mu.Lock()
	from := r.at.Sweeps
	r.mu.Unlock()
	// The first sweep to finish may have begun before now; the second
	// began after.
	r.until(r.t, "a sweep", func(p progress) bool { return p.Sweeps >= from+2 })
}
