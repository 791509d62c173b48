package teamfiles

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/inbox-dev/inbox"
)

// Both bridges run the same way (the daemon's single-owner loop): one
// goroutine, the one that called RunJSONL or RunClaude, owns all of a
// bridge's state (its state file, the teams, what it has queued, the
// files it has watched and refused) and does all of its work. Two
// helpers only send it messages on channels: the follower reads the
// event log, and the notifier turns fsnotify events into the directory
// that changed. Nothing is shared, so nothing is locked.

// side is what a bridge's format adds to the loop. Its methods run on
// the loop's goroutine only.
type side interface {
	// start looks at the files once, before the event log is followed.
	start(ctx context.Context) error
	// outEvent is the last event whose messages are in the files.
	outEvent() int64
	// outbound handles one event of the log.
	outbound(ctx context.Context, ev *inbox.Event)
	// changed handles a notification that directory dir changed.
	changed(ctx context.Context, dir string)
	// sweep looks at every file (the safety net under notifications).
	sweep(ctx context.Context)
	// flush writes what outbound queued, if it queues.
	flush()
	// save writes the bridge's state file when it changed.
	save()
}

// base is what both bridges have.
type base struct {
	cfg Config
	// name begins the bridge's log lines and errors ("team dir").
	name string
	// stateName is the state file's name in DIR/.inbox-bridge.
	stateName string
	// writeEvery is how often the loop calls flush (0: never but at
	// catch-up and at the end).
	writeEvery time.Duration

	teams   teamCache
	notify  *notifier
	dirty   bool     // the state changed since it was written
	refused refusals // planted files already logged
}

func newBase(cfg Config, name, stateName string) base {
	if cfg.index == nil {
		cfg.index = newRequestIndex(cfg.Bus, cfg.Dir, strings.TrimSuffix(stateName, ".json")+"-requests.json")
	}
	cfg.defaults()
	return base{cfg: cfg, name: name, stateName: stateName, teams: teamCache{bus: cfg.Bus}}
}

func (b *base) statePath() string { return filepath.Join(b.cfg.Dir, stateDir, b.stateName) }

// open makes the team directory and the bridge's state directory, and
// reads the state file into state (left as it is when there is none).
func (b *base) open(state any) error {
	if err := os.MkdirAll(b.cfg.Dir, 0o700); err != nil {
		return err
	}
	if _, err := dirAt(true, b.cfg.Dir, stateDir); err != nil {
		return fmt.Errorf("%s: %w", b.name, err)
	}
	if err := readJSON(b.statePath(), state); err != nil {
		return fmt.Errorf("%s: read %s: %w", b.name, b.statePath(), err)
	}
	return nil
}

// saveState writes state to the state file when it changed, and the
// index of requests.
func (b *base) saveState(state any) {
	if err := b.cfg.index.save(); err != nil {
		b.cfg.Log.Warn(b.name+": save the index of requests", "error", err)
	}
	if !b.dirty {
		return
	}
	if err := writeJSON(b.statePath(), state); err != nil {
		b.cfg.Log.Warn(b.name+": save state", "error", err)
		return
	}
	b.dirty = false
}

// errorLog appends line to the errors.log at p; a planted one is
// reported (with args) and left alone.
func (b *base) errorLog(p, line string, args ...any) {
	f, err := openFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		b.refused.report(b.cfg.Log, b.name+": errors.log", err, args...)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
}

// progress is how far a bridge's loop has got, for tests, which get it
// through Config.step after every step of the loop.
type progress struct {
	// Event is the last event whose messages are in the files.
	Event int64
	// Sweeps counts the sweeps finished.
	Sweeps int64
}

// run is the bridge's loop: it looks at the files, catches up with the
// event log (then closes Config.Ready), and from there on handles, one
// at a time, the events of the log, the notifications, the sweeps and
// the periodic flushes and saves, until ctx ends or the log cannot be
// followed. It returns once the follower has stopped.
func (b *base) run(ctx context.Context, s side) error {
	b.notify = newNotifier(b.cfg.ForcePoll)
	defer b.notify.stop()
	if err := s.start(ctx); err != nil {
		return err
	}
	last, err := b.cfg.Bus.LastEventID(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	// The follower sends the events in order and closes events when it
	// stops; followErr is why, read only after events is closed.
	events := make(chan *inbox.Event, 256)
	var followErr error
	go func(after int64) {
		defer close(events)
		followErr = follow(ctx, b.cfg.Bus, after, b.cfg.ForcePoll, func(ev *inbox.Event) bool {
			select {
			case events <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}(s.outEvent())
	defer func() {
		cancel()
		for range events {
		}
	}()
	var at progress
	step := func() {
		if b.cfg.step != nil {
			at.Event = s.outEvent()
			b.cfg.step(at)
		}
	}
	for caughtUp := s.outEvent() >= last; !caughtUp; {
		select {
		case ev, ok := <-events:
			if !ok {
				return followErr
			}
			s.outbound(ctx, ev)
			caughtUp = ev.EventID == last
		case <-ctx.Done():
			return nil
		}
		step()
	}
	s.flush()
	s.save()
	if b.cfg.Ready != nil {
		close(b.cfg.Ready)
	}
	step()
	sweep := time.NewTicker(b.cfg.Sweep)
	defer sweep.Stop()
	save := time.NewTicker(100 * time.Millisecond)
	defer save.Stop()
	var write <-chan time.Time
	if b.writeEvery > 0 {
		t := time.NewTicker(b.writeEvery)
		defer t.Stop()
		write = t.C
	}
	for {
		select {
		case <-write:
			s.flush()
		case <-ctx.Done():
			s.flush()
			s.save()
			return nil
		case ev, ok := <-events:
			if !ok {
				s.save()
				return followErr
			}
			s.outbound(ctx, ev)
		case dir := <-b.notify.C:
			s.changed(ctx, dir)
		case <-sweep.C:
			s.sweep(ctx)
			at.Sweeps++
		case <-save.C:
			s.save()
		}
		step()
	}
}

// follow runs fn on every event after `after`, in order, until ctx ends.
func follow(ctx context.Context, bus inbox.Bus, after int64, force bool, fn func(ev *inbox.Event) bool) error {
	err := bus.Follow(ctx, after, "", inbox.WaitOptions{ForcePoll: force}, fn)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// notifier sends the directory that changed, of those the bridge
// watches, on C. Its goroutine only forwards fsnotify's events; watch
// is called by the bridge's loop alone.
type notifier struct {
	fw    *fsnotify.Watcher
	C     chan string // the directory that changed
	dirs  map[string]bool
	close chan struct{}
}

func newNotifier(force bool) *notifier {
	n := &notifier{C: make(chan string, 64), dirs: map[string]bool{}, close: make(chan struct{})}
	if force {
		return n
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return n // the sweep polls
	}
	n.fw = fw
	go func() {
		for {
			select {
			case ev, ok := <-fw.Events:
				if !ok {
					return
				}
				select {
				case n.C <- filepath.Dir(ev.Name):
				default:
				}
			case _, ok := <-fw.Errors:
				if !ok {
					return
				}
			case <-n.close:
				return
			}
		}
	}()
	return n
}

// watch adds dir (once).
func (n *notifier) watch(dir string) {
	if n.fw == nil || n.dirs[dir] {
		return
	}
	if n.fw.Add(dir) == nil {
		n.dirs[dir] = true
	}
}

func (n *notifier) stop() {
	close(n.close)
	if n.fw != nil {
		n.fw.Close()
	}
}
