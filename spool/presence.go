package spool

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/inbox-dev/inbox"

	"github.com/gofrs/flock"
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
	lk   *flock.Flock
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
	dir := filepath.Join(s.dir, presenceDir, agent)
	if refuseLink(dir) != nil {
		return nil
	}
	s.sweepPresence(dir)
	name := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(waitSeq.Add(1), 10) + ".wait"
	// Created and locked under a dot name that sweeps leave alone, then
	// renamed into view: no one can take the lock between.
	hidden := filepath.Join(dir, "."+name)
	lock := func() (*flock.Flock, error) {
		lk := flock.New(hidden, flock.SetFlag(os.O_CREATE|os.O_EXCL|os.O_RDWR), flock.SetPermissions(s.fileMode))
		ok, err := lk.TryLock()
		if err == nil && !ok {
			err = errors.New("locked")
		}
		return lk, err
	}
	lk, err := lock()
	if errors.Is(err, fs.ErrNotExist) && os.MkdirAll(dir, s.dirMode) == nil {
		lk, err = lock()
	}
	if err != nil {
		return nil
	}
	if len(data) > 0 {
		if err := os.WriteFile(hidden, data, s.fileMode); err != nil {
			os.Remove(hidden)
			lk.Unlock()
			return nil
		}
	}
	// The file's time is when the wait began, on the clock activity is
	// recorded with (a new file's own time comes from a coarser clock).
	now := s.now()
	os.Chtimes(hidden, now, now)
	p := filepath.Join(dir, name)
	if err := os.Rename(hidden, p); err != nil {
		os.Remove(hidden)
		lk.Unlock()
		return nil
	}
	return &presence{path: p, lk: lk}
}

// Release ends the wait: the file goes first, then the lock, so no reader
// ever takes the lock of a live wait.
func (p *presence) Release() {
	if p == nil {
		return
	}
	os.Remove(p.path)
	p.lk.Unlock()
}

// sweepPresence removes the files of waits whose processes died: a new
// wait by the same agent shows it is back.
func (s *Store) sweepPresence(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // being created
		}
		p := filepath.Join(dir, e.Name())
		lk := flock.New(p, flock.SetFlag(os.O_RDONLY)) // read-only: a close is no waiter's (presence_follow.go)
		if ok, err := lk.TryLock(); err == nil && ok {
			os.Remove(p)
			lk.Unlock()
		}
	}
}

// waits reports whether a live process waits for agent now, and the
// latest time a waiter of agent died (zero if none did).
func (s *Store) waits(agent string) (live bool, died time.Time) {
	dir := filepath.Join(s.dir, presenceDir, agent)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, time.Time{}
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // being created
		}
		p := filepath.Join(dir, e.Name())
		lk := flock.New(p, flock.SetFlag(os.O_RDONLY)) // read-only: a close is no waiter's (presence_follow.go)
		ok, err := lk.TryLock()
		if err != nil {
			continue // removed meanwhile: the wait ended normally
		}
		if !ok {
			live = true
			continue
		}
		// Lockable: its process is gone. When it died is not recorded;
		// the file's time says when it began waiting, a lower bound.
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(died) {
			died = fi.ModTime()
		}
		lk.Unlock()
	}
	return live, died
}
