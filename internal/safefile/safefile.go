// Package safefile opens files in directories that others may plant
// things in (a store, a team directory) without following a symbolic
// link or blocking on a FIFO: SPEC §8's rule that nothing inside the store
// or a team directory is followed or opened blocking when it is not a
// regular file.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is what a *NotRegularError wraps.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError says that the file at Path is What ("a symbolic link",
// "a FIFO", …), not a regular file.
type NotRegularError struct {
	Path string
	What string
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, e.What)
}

func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// OpenFile opens p like os.OpenFile, adding O_NOFOLLOW and O_NONBLOCK, and
// returns only a regular file: a symbolic link (ELOOP), a socket (ENXIO),
// a FIFO, a device or a directory at p is a *NotRegularError. O_NONBLOCK,
// which only mattered for opening a FIFO, is cleared on the open file. A
// missing file is fs.ErrNotExist, as from os.OpenFile.
func OpenFile(p string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(p, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if err != nil {
		if fi, lerr := os.Lstat(p); lerr == nil && !fi.Mode().IsRegular() {
			return nil, &NotRegularError{Path: p, What: TypeName(fi.Mode())}
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
		return nil, &NotRegularError{Path: p, What: TypeName(fi.Mode())}
	}
	syscall.SetNonblock(int(f.Fd()), false)
	return f, nil
}

// ReadFile reads the whole file at p through OpenFile, like os.ReadFile.
func ReadFile(p string) ([]byte, error) {
	f, err := OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	buf := make([]byte, 0, size+512)
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

// TypeName says what a file of mode is, in words.
func TypeName(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	case mode&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode.IsDir():
		return "a directory"
	case mode.IsRegular():
		return "a regular file"
	}
	return "a special file"
}
