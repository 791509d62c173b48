// Package watcher turns file-system notifications for one directory into
// wake-ups. It is a doorbell, not a record: a wake-up says "something in
// the directory may have changed, look again", never what changed. Callers
// arm a Watcher first, then scan for what they are waiting for, then wait
// for a wake-up and scan again; that order means a change that lands
// between the scan and the wait is never missed.
//
// # Guarantees
//
// After New returns, every later change in the directory causes at least
// one value on C (wake-ups are coalesced: many changes may give one).
// When fsnotify cannot be used (the inotify watch or instance limit is
// reached, the file system does not support it) or its queue overflows,
// the Watcher falls back to ticking every poll interval, so waiting stays
// correct; Fallback reports why.
//
// # Caveats
//
// Only the directory itself is watched, not subdirectories. A Watcher uses
// one inotify instance and one watch; Close releases them.
package watcher

import (
	"errors"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultPoll is the polling interval used when notifications are
// unavailable.
const DefaultPoll = 100 * time.Millisecond

// Watcher delivers wake-ups for changes in one directory.
type Watcher struct {
	// C receives a value after changes in the directory. It has a buffer
	// of one: a pending wake-up absorbs later ones until it is received.
	C <-chan struct{}

	c        chan struct{}
	fs       *fsnotify.Watcher
	poll     time.Duration
	done     chan struct{}
	mu       sync.Mutex
	fallback error
}

// Options tune a Watcher; the zero value is fine.
type Options struct {
	// Poll is the fallback polling interval (default DefaultPoll).
	Poll time.Duration
	// ForcePoll skips fsnotify entirely (for tests and for file systems
	// known not to deliver notifications).
	ForcePoll bool
	// ExitSoon says the process will exit shortly after the wait (a CLI
	// call): the watch is handed to a helper process so that tearing it
	// down does not delay the exit (see handoff_linux.go).
	ExitSoon bool
}

// ErrForcedPoll is the fallback reason when Options.ForcePoll is set.
var ErrForcedPoll = errors.New("polling was requested")

// New watches dir. It does not fail when notifications are unavailable: it
// polls instead (see Fallback). It fails only if dir cannot be watched or
// polled at all.
func New(dir string, opts Options) (*Watcher, error) {
	w := &Watcher{c: make(chan struct{}, 1), poll: opts.Poll, done: make(chan struct{})}
	w.C = w.c
	if w.poll <= 0 {
		w.poll = DefaultPoll
	}
	if opts.ForcePoll {
		w.startPolling(ErrForcedPoll)
		return w, nil
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		w.startPolling(err)
		return w, nil
	}
	if err := fw.Add(dir); err != nil {
		fw.Close()
		w.startPolling(err)
		return w, nil
	}
	w.fs = fw
	go w.loop()
	if opts.ExitSoon {
		handOff()
	}
	return w, nil
}

// Fallback returns why the Watcher is polling, or nil if it is not.
func (w *Watcher) Fallback() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fallback
}

func (w *Watcher) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

func (w *Watcher) loop() {
	for {
		select {
		case <-w.done:
			return
		case _, ok := <-w.fs.Events:
			if !ok {
				return
			}
			w.wake()
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			// An overflow or a watch error means events may have been
			// lost: wake the caller to rescan, and keep polling from now
			// on so that nothing else slips through.
			w.wake()
			w.startPolling(err)
		}
	}
}

func (w *Watcher) startPolling(reason error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fallback != nil {
		return
	}
	w.fallback = reason
	go func() {
		t := time.NewTicker(w.poll)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				w.wake()
			}
		}
	}()
}

// Close stops the Watcher. It returns at once: closing an inotify instance
// can take milliseconds, which a command about to exit should not spend,
// so the instance is released in the background.
func (w *Watcher) Close() error {
	close(w.done)
	if w.fs != nil {
		go w.fs.Close()
	}
	return nil
}
