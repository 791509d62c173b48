package spool

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/safefile"
)

// Waiting presence (SPEC §7). A process that blocks for an agent (receive,
// wait-reply, watch, an MCP session) creates presence/<agent>/<pid>-<n>.wait
// and holds an exclusive flock on it while it waits. The lock, not a
// timestamp, proves the process is there: the kernel drops it when the
// process exits, however it exits. A process that ends its wait normally
// unlinks the file before it lets go of the lock, so a file whose lock
// anyone can take belongs to a process that died while waiting: its agent
// is "gone" until it acts again. Each file belongs to one process and is
// used by it alone, so unlinking it has none of the races of a shared lock
// file.

var waitSeq atomic.Int64

// presence is a registration of a waiting process; Release ends it.
type presence struct {
	path string
	f    *os.File // the wait file, open and exclusively locked while the wait lasts
}

// Waiting records that this process is blocked for agent until release
// is called. It is best effort: a store that cannot record it still lets
// the wait go on.
func (s *Store) Waiting(ctx context.Context, agent string) (release func()) {
	return s.waiting(agent).Release
}

func (s *Store) waiting(agent string) *presence {
	return s.waitingWith(agent, nil)
}

// waitingWith registers a wait of agent whose file holds data (what the
// wait is on, see waits.go; nothing for a plain wait), written before the
// file comes into view so that a reader never sees it partly written.
func (s *Store) waitingWith(agent string, data []byte) *presence {
	if agent == "" || inbox.ValidateAgent("agent", agent) != nil || s.linkErr != nil {
		return nil
	}
	p := filepath.Join(s.dir, presenceDir, agent)
	d, err := safefile.OpenDir(p)
	if errors.Is(err, fs.ErrNotExist) && os.MkdirAll(p, s.dirMode) == nil {
		d, err = safefile.OpenDir(p)
	}
	if err != nil {
		return nil // not a directory (planted): fsck reports it
	}
	defer d.Close()
	sweepPresence(d)
	name := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(waitSeq.Add(1), 10) + ".wait"
	// Created and locked under a dot name that sweeps leave alone, then
	// renamed into view: no one can take the lock between. The file is
	// written and timed through its own descriptor, never by its name.
	hidden := "." + name
	f, err := d.Open(hidden, os.O_CREATE|os.O_EXCL|os.O_RDWR, s.fileMode)
	if err != nil {
		return nil
	}
	fail := func() *presence {
		d.Remove(hidden)
		f.Close()
		return nil
	}
	if ok, err := safefile.TryLock(f, syscall.LOCK_EX); err != nil || !ok {
		return fail()
	}
	if len(data) > 0 {
		if _, err := f.Write(data); err != nil {
			return fail()
		}
	}
	// The file's time is when the wait began, on the clock activity is
	// recorded with (a new file's own time comes from a coarser clock).
	d.Chtimes(hidden, s.now())
	if err := d.Rename(hidden, name); err != nil {
		return fail()
	}
	return &presence{path: d.Path(name), f: f}
}

// Release ends the wait: the file goes first, then the lock, so no reader
// ever takes the lock of a live wait.
func (p *presence) Release() {
	if p == nil {
		return
	}
	os.Remove(p.path)
	p.f.Close()
}

// eachWait calls fn with each wait file in view in the agent's presence
// directory d (not the dot names of waits being created; nothing but
// regular files, so that a FIFO, socket or link planted there is never
// opened: fsck reports it).
func eachWait(d *safefile.Dir, fn func(name string)) {
	entries, _ := d.Entries()
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		fn(e.Name())
	}
}

// probeWait opens the wait file name in d read-only (so that its close is
// no waiter's, presence_follow.go) and takes a shared lock of it, which
// only its live waiter's exclusive lock keeps it from: held is true when
// a live process waits. The caller closes f (nil when err is set: the
// file is gone, the wait ended, or it is no regular file).
func probeWait(d *safefile.Dir, name string) (f *os.File, held bool, err error) {
	f, err = d.Open(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, false, err
	}
	ok, err := safefile.TryLock(f, syscall.LOCK_SH)
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, !ok, nil
}

// sweepPresence removes the files of waits whose processes died from the
// agent's presence directory d: a new wait by the same agent shows it is
// back.
func sweepPresence(d *safefile.Dir) {
	eachWait(d, func(name string) {
		f, err := d.Open(name, os.O_RDONLY, 0) // read-only: a close is no waiter's (presence_follow.go)
		if err != nil {
			return
		}
		if ok, err := safefile.TryLock(f, syscall.LOCK_EX); err == nil && ok {
			d.Remove(name)
		}
		f.Close()
	})
}

// waits reports whether a live process waits for agent now, and the
// latest time a waiter of agent died (zero if none did).
func (s *Store) waits(agent string) (live bool, died time.Time) {
	d, err := safefile.OpenDir(filepath.Join(s.dir, presenceDir, agent))
	if err != nil {
		return false, time.Time{}
	}
	defer d.Close()
	eachWait(d, func(name string) {
		f, held, err := probeWait(d, name)
		if err != nil {
			return // removed meanwhile (the wait ended normally), or planted
		}
		defer f.Close()
		if held {
			live = true
			return
		}
		// Lockable: its process is gone. When it died is not recorded;
		// the file's time says when it began waiting, a lower bound.
		if fi, err := f.Stat(); err == nil && fi.ModTime().After(died) {
			died = fi.ModTime()
		}
	})
	return live, died
}
