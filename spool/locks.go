package spool

import (
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox"
)

// The store's locks are flocks on files in locks/, never removed: one
// per stripe of threads, idem.lock, teams.lock, events.lock (the event
// log), flush.lock (group commit, eventlog.go), checkpoint.lock and
// daemon.lock. Every wait for one is bounded (lockwait.go).

// lockStripes is the number of thread lock files. Threads share them by
// hash, so creating a thread allocates no lock file; two threads in one
// stripe merely take turns.
const lockStripes = 256

// threadLock returns the lock guarding thread tid.
func (s *Store) threadLock(tid string) *flock.Flock {
	h := fnv.New32a()
	h.Write([]byte(tid))
	return newLock(s.stripeLock(h.Sum32()%lockStripes), s.fileMode)
}

// stripeLock is the path of thread lock stripe i.
func (s *Store) stripeLock(i uint32) string { return s.lockFile(fmt.Sprintf("thread-%02x.lock", i)) }

// lockThread takes the thread's lock; a missing thread is inbox.ErrNotFound.
func (s *Store) lockThread(ctx context.Context, tid string) (*flock.Flock, error) {
	if s.linkErr != nil {
		return nil, s.linkErr
	}
	dir := s.threadDir(tid)
	if err := refuseLink(dir); err != nil {
		return nil, err
	}
	if !exists(filepath.Join(dir, headerLog)) && !exists(filepath.Join(dir, msgName(1))) {
		if exists(s.archivedDir(tid)) {
			return nil, inbox.InvalidState("thread %s is archived: it can be shown but not changed", tid)
		}
		return nil, inbox.NotFound("thread %s not found", tid)
	}
	lk := s.threadLock(tid)
	if err := s.lockWithin(ctx, lk, "thread "+tid); err != nil {
		return nil, err
	}
	return lk, nil
}

// lockAll takes every lock a writer can hold — all thread stripes, the
// idempotency lock and the event log — in the writers' order, so that
// nothing changes the store until unlock. Upkeep that must see a still
// store (fsck --repair, reindex, archive) runs under it.
func (s *Store) lockAll(ctx context.Context) (unlock func(), err error) {
	var held []*flock.Flock
	unlock = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Unlock()
		}
	}
	var paths []string
	for i := range uint32(lockStripes) {
		paths = append(paths, s.stripeLock(i))
	}
	paths = append(paths, s.lockFile("idem.lock"), s.log.lockPath)
	for _, p := range paths {
		lk := newLock(p, s.fileMode)
		if err := s.lockWithin(ctx, lk, filepath.Base(p)); err != nil {
			unlock()
			return nil, err
		}
		held = append(held, lk)
	}
	return unlock, nil
}

// lockAllToWrite is lockAll for upkeep that appends to the event log
// while it holds every lock (fsck --repair, replay). It returns, with
// unlock, a view of s for the caller alone: the same store, whose
// appends do not take events.lock again (a second flock from this
// process would wait for itself). Other goroutines using s still take
// it, and so wait for unlock.
func (s *Store) lockAllToWrite(ctx context.Context) (locked *Store, unlock func(), err error) {
	unlock, err = s.lockAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	v := *s
	l := *s.log
	l.held = true
	v.log = &l
	return &v, unlock, nil
}
