package spool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/inbox-dev/inbox"
)

// Group commit. A writer flushes its lines after releasing the log: it
// takes the flock on locks/flush.lock and reads the record that file
// holds — the segment and offset up to which the log is known to be on
// disk. When a flush that started after its lines were written already
// covered them, it is done without a flush of its own; otherwise it notes
// how long the segment is, fdatasyncs (which covers every line written
// before), and records that length. While one writer flushes, the writers
// behind it queue on the lock, and the first of them usually finds its
// lines covered. The record carries the machine's boot id: after a reboot
// it covers nothing. Keeping the record in the lock file itself spares a
// flush two opens of another file.

// flushed is the record in locks/flush.lock.
type flushed struct {
	boot    string
	segment int64
	offset  int64
}

// flushLock is locks/flush.lock, open and exclusively flocked; Close
// unlocks it.
type flushLock struct{ f *os.File }

func (l *eventLog) lockFlush() (flushLock, error) {
	f, err := openFile(filepath.Join(filepath.Dir(l.lockPath), "flush.lock"), os.O_CREATE|os.O_RDWR, l.fileMode)
	if err != nil {
		return flushLock{}, inbox.Storage(err, "lock the event log's flush")
	}
	flock := func(how int) error {
		for {
			err := syscall.Flock(int(f.Fd()), how)
			if err != syscall.EINTR {
				return err
			}
		}
	}
	err = flock(syscall.LOCK_EX | syscall.LOCK_NB)
	if err == syscall.EWOULDBLOCK {
		var timedOut bool
		// Not the caller's context: the change is committed already, and
		// a cancelled call must not leave it unflushed.
		timedOut, err = waitBounded(context.Background(), func() error { return flock(syscall.LOCK_EX) }, func() { f.Close() }, l.lockTimeout)
		if timedOut {
			return flushLock{}, lockTimeoutError(f.Name(), "event log's flush", orDefault(l.lockTimeout))
		}
	}
	if err != nil {
		f.Close()
		return flushLock{}, inbox.Storage(err, "lock the event log's flush")
	}
	return flushLock{f}, nil
}

func (k flushLock) Close() error { return k.f.Close() }

// read returns the record; a missing or damaged one covers nothing.
func (k flushLock) read() flushed {
	var buf [128]byte
	n, _ := k.f.ReadAt(buf[:], 0)
	parts := strings.Fields(string(buf[:n]))
	if len(parts) != 3 {
		return flushed{}
	}
	seg, err1 := strconv.ParseInt(parts[1], 10, 64)
	off, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return flushed{}
	}
	return flushed{boot: parts[0], segment: seg, offset: off}
}

// write records that segment is on disk up to offset. The record has a
// fixed width, so it overwrites the last in place; it stays in the page
// cache (no fsync): after a crash of the machine its boot id no longer
// matches.
func (k flushLock) write(segment, offset int64) error {
	rec := fmt.Sprintf("%s %020d %020d\n", bootID(), segment, offset)
	_, err := k.f.WriteAt([]byte(rec), 0)
	return inbox.Storage(err, "record the flushed offset")
}

// setFlushed records, under the flush lock, that segment is on disk up to
// offset: for the writers that flush under the log's lock (a rotation, a
// repair), which takes the flush lock after it, as nothing takes them in
// the other order.
func (l *eventLog) setFlushed(segment, offset int64) error {
	k, err := l.lockFlush()
	if err != nil {
		return err
	}
	defer k.Close()
	return k.write(segment, offset)
}

// flush makes segment durable up to at least end (see Group commit).
func (l *eventLog) flush(f *os.File, segment, end int64) error {
	if l.unsynced || skipLogFlush {
		return nil
	}
	k, err := l.lockFlush()
	if err != nil {
		return err
	}
	defer k.Close()
	done := k.read()
	if boot := bootID(); boot != "" && done.boot == boot && (done.segment > segment || done.segment == segment && done.offset >= end) {
		// A later segment exists only once this one was flushed (see
		// appender.open), or a flush started after our write covered it.
		flushesShared.Add(1)
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return inbox.Storage(err, "stat event log")
	}
	covered := fi.Size()
	if err := fdatasync(f); err != nil {
		return inbox.Storage(err, "fsync event log")
	}
	flushesDone.Add(1)
	return k.write(segment, covered)
}

// skipLogFlush leaves out the log's flush: only for the test that shows
// the power-cut test catches its absence.
var skipLogFlush bool

// flushesDone and flushesShared count this process's log flushes and the
// flushes it was spared by another writer's (for tests of group commit).
var flushesDone, flushesShared atomic.Int64
