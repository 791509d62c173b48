package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/watcher"
)

// Config is what the daemon serves.
type Config struct {
	Store    inbox.Bus
	Intake   string // the intake directory
	IntakeTo string // the agent new prompt and spawn_worker threads go to
	TrustAll bool   // accept spawn_worker descriptors
	Log      *slog.Logger
	// Sweep is the safety-net interval (default 2 s).
	Sweep time.Duration
	// ForcePoll polls instead of using file notifications.
	ForcePoll bool
}

// daemon is the state of one Run. Run's loop owns it: the event follower
// only sends events over a channel, and a batch finishing in the
// background touches its own files, not this.
type daemon struct {
	cfg     Config
	s       inbox.Bus
	log     *slog.Logger
	tracked map[string][]string // thread id → descriptors awaiting its .outcome
	byName  map[string]string   // descriptor → the thread it awaits
	leases  expiryHeap
	resweep time.Time // when deferred (young or failing) descriptors should be retried
	// retry holds descriptors whose dispatch or finishing failed (a full
	// disk, say): they wait, with a back-off, instead of being retried
	// at every file event their own attempts cause.
	retry map[string]*backoff
	iw    *watcher.Watcher
	iwDir os.FileInfo // the intake directory iw watches
	// pw watches the intake's parent directory, so that the intake moved
	// away, deleted or replaced by another directory is noticed at once:
	// a watch on the intake itself follows the directory, not its path.
	// Nil when the intake watch polls (polling looks at the path).
	pw *watcher.Watcher
}

// Run serves until ctx is cancelled, finishing the descriptor in hand.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Sweep <= 0 {
		cfg.Sweep = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := inbox.ValidateAgent("intake-to", cfg.IntakeTo); err != nil {
		return err
	}
	d := &daemon{cfg: cfg, s: cfg.Store, log: cfg.Log, tracked: map[string][]string{}, byName: map[string]string{},
		retry: map[string]*backoff{}}
	if err := d.ensureIntake(); err != nil {
		return err
	}
	d.watchParent()
	if err := d.watchIntake(); err != nil {
		return err
	}
	defer func() {
		if d.iw != nil {
			d.iw.Close()
		}
		if d.pw != nil {
			d.pw.Close()
		}
	}()
	// Follow the events from now on before looking at the past, so that
	// nothing that happens in between is missed.
	start, err := d.s.LastEventID(ctx)
	if err != nil {
		return d.startFailed(ctx, err)
	}
	events := make(chan *inbox.Event, 256)
	followCtx, stopFollowing := context.WithCancel(ctx)
	following := make(chan struct{})
	go d.follow(followCtx, start, events, following)
	defer func() { stopFollowing(); <-following }()
	d.cleanTemps()
	if err := d.seedLeases(ctx); err != nil {
		return d.startFailed(ctx, err)
	}
	if err := d.catchUpOutcomes(ctx); err != nil {
		return d.startFailed(ctx, err)
	}
	d.log.Info("daemon started", "intake", cfg.Intake, "intake_to", cfg.IntakeTo, "trust_all", cfg.TrustAll,
		"held_leases", d.leases.Len(), "awaiting_outcome", len(d.tracked))
	d.sweep(ctx)
	d.expire(ctx)

	sweep := time.NewTicker(cfg.Sweep)
	defer sweep.Stop()
	lease := time.NewTimer(time.Hour)
	defer lease.Stop()
	for {
		lease.Reset(d.untilNext())
		select {
		case <-ctx.Done():
			d.log.Info("daemon stopping")
			return nil
		case <-d.intakeC():
			d.sweep(ctx)
		case <-d.parentC():
			if d.replaced() {
				d.sweep(ctx) // re-arms on the directory there now
			}
		case ev := <-events:
			d.event(ctx, ev)
		case <-sweep.C:
			d.sweep(ctx)
			d.checkpoint()
		case <-lease.C:
			d.expire(ctx)
			if !d.resweep.IsZero() && !time.Now().Before(d.resweep) {
				d.resweep = time.Time{}
				d.sweep(ctx)
			}
		}
	}
}

// startFailed is what Run returns when a step of its start failed with
// err: nothing when ctx ended meanwhile (a stop while starting is a clean
// stop, and the step failed only because it was cancelled), else err.
func (d *daemon) startFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		d.log.Info("daemon stopping")
		return nil
	}
	return err
}

// checkpoint lets a backend that materialises files lazily make them
// durable (spool's watermark; see docs/ARCHITECTURE.md), so that a crash
// of the machine leaves little to replay.
func (d *daemon) checkpoint() {
	if c, ok := d.s.(interface{ Checkpoint() error }); ok {
		if err := c.Checkpoint(); err != nil {
			d.log.Warn("cannot checkpoint the store", "error", err)
		}
	}
}

// follow sends the events after id start to events until ctx ends, on a
// goroutine of its own (the daemon's state stays with Run's loop). A
// failure to read is logged and retried a second later from the last
// event sent.
func (d *daemon) follow(ctx context.Context, start int64, events chan<- *inbox.Event, done chan<- struct{}) {
	defer close(done)
	after := start
	for {
		err := d.s.Follow(ctx, after, "", inbox.WaitOptions{ForcePoll: d.cfg.ForcePoll}, func(ev *inbox.Event) bool {
			select {
			case events <- ev:
				after = ev.EventID
				return true
			case <-ctx.Done():
				return false
			}
		})
		if ctx.Err() != nil {
			return
		}
		d.log.Error("cannot follow the event log; retrying", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// event handles one new event: a terminal thread gets its .outcome,
// claims and renewals feed the lease-expiry schedule.
func (d *daemon) event(ctx context.Context, ev *inbox.Event) {
	switch ev.EventType {
	case inbox.EventThreadDone, inbox.EventThreadFailed, inbox.EventThreadCancelled:
		if _, ok := d.tracked[ev.ThreadID]; ok {
			d.outcome(ctx, ev.ThreadID)
		}
	case inbox.EventThreadClaimed, inbox.EventLeaseRenewed:
		var p struct {
			ExpiresAt string `json:"expires_at"`
		}
		if json.Unmarshal(ev.PayloadJSON, &p) == nil {
			if t, err := time.Parse(time.RFC3339Nano, p.ExpiresAt); err == nil {
				d.schedule(ev.ThreadID, t)
			}
		}
	}
}
