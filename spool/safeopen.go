package spool

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/inbox-dev/inbox"
)

// Files planted in place of the store's own (SPEC §8). Every file the
// store reads or writes is opened with O_NOFOLLOW and O_NONBLOCK and
// checked to be a regular file before a byte moves: a symbolic link is
// never written or read through (opening it fails with ELOOP), and a
// FIFO, socket or device never hangs a reader (O_NONBLOCK makes the open
// of a FIFO return at once, and the fstat refuses it). Such a file is an
// error of code not_a_store_file (ErrFormat); fsck reports it and
// --repair sets it aside (fsckPlanted).

// noFollow are the flags added to every open of a store file.
const noFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// openFile opens the store file p like os.OpenFile, refusing anything but
// a regular file. A missing file is fs.ErrNotExist, as from os.OpenFile.
func openFile(p string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(p, flag|noFollow, perm)
	if err != nil {
		if isLoop(err) {
			return nil, planted(p, "a symbolic link")
		}
		// A socket cannot be opened at all (ENXIO).
		if fi, lerr := os.Lstat(p); lerr == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil, planted(p, describeMode(fi.Mode()))
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, planted(p, describeMode(fi.Mode()))
	}
	// O_NONBLOCK means nothing to a regular file's reads and writes, but
	// clear it so that nothing downstream can be surprised.
	syscall.SetNonblock(int(f.Fd()), false)
	return f, nil
}

// openRead opens the store file p for reading (see openFile).
func openRead(p string) (*os.File, error) { return openFile(p, os.O_RDONLY, 0) }

// readFile reads the whole store file p, like os.ReadFile (see openFile).
func readFile(p string) ([]byte, error) {
	f, err := openRead(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, fi.Size()+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// isLoop reports whether err is the ELOOP of an O_NOFOLLOW open of a link.
func isLoop(err error) bool {
	var pe *fs.PathError
	if e, ok := err.(*fs.PathError); ok {
		pe = e
	}
	return pe != nil && pe.Err == syscall.ELOOP
}

// planted is the error for a store file that is not a regular file.
func planted(p, what string) error {
	return &inbox.Error{Code: "not_a_store_file", Err: inbox.ErrFormat,
		Rule: fmt.Sprintf("%s is %s, not a file inbox wrote; inbox neither reads nor writes through it (inbox fsck --repair sets it aside)", p, what)}
}

// describeMode names a file type in words.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "not a regular file"
}
