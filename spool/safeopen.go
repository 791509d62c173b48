package spool

import (
	"errors"
	"os"

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
