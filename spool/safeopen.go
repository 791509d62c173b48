package spool

import (
	"errors"
	"os"
	"syscall"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/safefile"
)

// Files planted in place of the store's own (SPEC §8). Every file the
// store reads or writes is opened through package safefile: with
// O_NOFOLLOW and O_NONBLOCK, and used only if fstat says it is a regular
// file. A symbolic link is never written or read through, and a FIFO,
// socket or device never hangs a reader. Such a file is an error of code
// not_a_store_file (ErrFormat); fsck reports it and --repair sets it
// aside (fsckSymlinks).

// openFile opens the store file p like os.OpenFile, refusing anything but
// a regular file. A missing file is fs.ErrNotExist, as from os.OpenFile.
func openFile(p string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := safefile.OpenFile(p, flag, perm)
	return f, plantedErr(err)
}

// openRead opens the store file p for reading (see openFile).
func openRead(p string) (*os.File, error) { return openFile(p, os.O_RDONLY, 0) }

// readFile reads the whole store file p, like os.ReadFile (see openFile).
func readFile(p string) ([]byte, error) {
	data, err := safefile.ReadFile(p)
	return data, plantedErr(err)
}

// plantedErr turns safefile's refusal into the store's error.
func plantedErr(err error) error {
	var nr *safefile.NotRegularError
	if errors.As(err, &nr) {
		return &inbox.Error{Code: "not_a_store_file", Err: inbox.ErrFormat, Cause: err,
			Rule: nr.Path + " is " + nr.What + ", not a file inbox wrote; inbox neither reads nor writes through it (inbox fsck --repair sets it aside)"}
	}
	return err
}

// The store's lock files (locks/, locks.go) are flocks taken through
// gofrs/flock, which opens the file by name itself. newLock has it open
// the file without following a link planted there (which would create a
// file wherever it points) or blocking on a FIFO, and tryLock and
// lockWithin let go of a lock at once when fstat says it was taken on
// anything but a regular file: a planted lock file is refused with
// not_a_store_file, and fsck --repair sets it aside before it takes the
// locks (plantedLocks).

// lockFlags opens a lock file, creating it if need be.
const lockFlags = os.O_CREATE | os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// newLock returns the flock of the store's lock file p (made with mode).
func newLock(p string, mode os.FileMode) *flock.Flock {
	return flock.New(p, flock.SetFlag(lockFlags), flock.SetPermissions(mode))
}

// tryLock is lk.TryLock for a lock of newLock's, refusing a planted file.
func tryLock(lk *flock.Flock) (bool, error) {
	ok, err := lk.TryLock()
	if err != nil {
		return false, lockOpenErr(lk.Path(), err)
	}
	if ok {
		if err := checkLocked(lk); err != nil {
			return false, err
		}
	}
	return ok, nil
}

// lockOpenErr is err, from opening the lock file p; a link, socket or
// directory planted there (ELOOP, ENXIO, EISDIR) is not_a_store_file.
func lockOpenErr(p string, err error) error {
	if fi, lerr := os.Lstat(p); lerr == nil && !fi.Mode().IsRegular() {
		return plantedErr(&safefile.NotRegularError{Path: p, What: safefile.TypeName(fi.Mode())})
	}
	return err
}

// checkLocked lets go of the lock lk, just taken, unless it is on a
// regular file (a FIFO opens without blocking and takes a flock).
func checkLocked(lk *flock.Flock) error {
	fi, err := lk.Stat() // fstat of the descriptor the lock is on
	if err == nil && fi.Mode().IsRegular() {
		return nil
	}
	lk.Unlock()
	if err != nil {
		return inbox.Storage(err, "check the lock file %s", lk.Path())
	}
	return plantedErr(&safefile.NotRegularError{Path: lk.Path(), What: safefile.TypeName(fi.Mode())})
}
