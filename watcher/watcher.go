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
// the Watcher falls back to polling: every poll interval it lists the
// directory and stats its entries, and wakes the caller when anything
// changed, so waiting stays correct; Fallback reports why.
//
// # Caveats
//
// Only the directory itself is watched, not subdirectories. A Watcher uses
// one inotify instance and one watch; Close releases them.
package watcher

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
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
	dir      string
	fs       *fsnotify.Watcher
	exitSoon bool
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
	// call): Close removes the watch at once and releases the instance
	// only later, so that tearing it down does not delay the exit (see
	// Close).
	ExitSoon bool
}

// ErrForcedPoll is the fallback reason when Options.ForcePoll is set.
var ErrForcedPoll = errors.New("polling was requested")

// New watches dir. It does not fail when notifications are unavailable: it
// polls instead (see Fallback). It fails only if dir cannot be watched or
// polled at all.
func New(dir string, opts Options) (*Watcher, error) {
	w := &Watcher{c: make(chan struct{}, 1), dir: dir, poll: opts.Poll, exitSoon: opts.ExitSoon, done: make(chan struct{})}
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
	// The baseline is taken before New returns, so that every change after
	// it is seen: a baseline taken later could already include a change
	// the caller never looked for (a lost wake-up).
	var fp dirPrint
	fp.changed(w.dir)
	go func() {
		t := time.NewTicker(w.poll)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				// Wake the caller only when the directory changed: a
				// couple of stats are far cheaper than the caller's scan,
				// which matters when many waiters poll.
				if fp.changed(w.dir) {
					w.wake()
				}
			}
		}
	}()
}

// dirPrint remembers a directory's entries and their sizes and times. It
// relists the directory only when the directory itself changed (an entry
// was added, removed or renamed); otherwise a poll is one stat of the
// directory and one per entry, with no descriptor opened.
type dirPrint struct {
	dirTime int64
	names   []string
	sum     uint64
}

// changed refreshes the print and reports whether it differs from before.
func (d *dirPrint) changed(dir string) bool {
	_, dt, ok := statKey(dir)
	if !ok {
		d.dirTime, d.names, d.sum = 0, nil, 0
		return true // gone or unreadable: let the caller find out
	}
	if dt != d.dirTime || d.names == nil {
		f, err := os.Open(dir)
		if err != nil {
			return true
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return true
		}
		slices.Sort(names)
		d.dirTime, d.names = dt, names
	}
	h := fnv.New64a()
	var buf [16]byte
	for _, n := range d.names {
		size, mt, ok := statKey(filepath.Join(dir, n))
		if !ok {
			continue
		}
		h.Write([]byte(n))
		binary.LittleEndian.PutUint64(buf[:8], uint64(size))
		binary.LittleEndian.PutUint64(buf[8:], uint64(mt))
		h.Write(buf[:])
	}
	sum := h.Sum64()
	was := d.sum
	d.sum = sum
	return sum != was
}

// releaseDelay is how long Close leaves an ExitSoon Watcher's inotify
// instance open after removing its watch: long past the kernel's
// grace period for the removed watch (milliseconds), so that the close
// itself is quick.
const releaseDelay = 100 * time.Millisecond

// Close stops the Watcher. It returns at once.
//
// Closing an inotify instance that still holds a watch makes the kernel
// wait for an SRCU grace period (10–20 ms measured) before the close
// returns, and a process cannot finish exiting while a close waits: a
// short-lived waiter would spend longer exiting than the whole wake-up.
// The kernel's wait is for the watch's mark, which it frees in the
// background once the watch is removed. So, with ExitSoon, Close removes
// the watch now (a quick system call) and closes the instance
// releaseDelay later, when the mark is long gone; a process that exits
// before then lets the exit close it, by which time the grace period has
// mostly passed while the command printed its result. Without ExitSoon
// the instance is closed in the background at once: a long-lived process
// does not wait for it.
func (w *Watcher) Close() error {
	close(w.done)
	if w.fs == nil {
		return nil
	}
	if w.exitSoon {
		w.fs.Remove(w.dir) // an error leaves the watch to the close below
		time.AfterFunc(releaseDelay, func() { w.fs.Close() })
		return nil
	}
	go w.fs.Close()
	return nil
}
