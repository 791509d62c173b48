package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dir is a directory opened without following a symbolic link, whose
// files are opened relative to it: a link planted in place of the
// directory, or swapped in while it is open, is never read through.
type Dir struct {
	f    *os.File
	fd   int
	path string
}

// OpenDir opens the directory p. A symbolic link, a FIFO or anything else
// but a directory at p is a *NotRegularError (What says what it is); a
// missing directory is fs.ErrNotExist.
func OpenDir(p string) (*Dir, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			if fi, lerr := os.Lstat(p); lerr == nil && !fi.IsDir() {
				return nil, &NotRegularError{Path: p, What: TypeName(fi.Mode())}
			}
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), p), fd: fd, path: p}, nil
}

// Entries lists the directory, unsorted.
func (d *Dir) Entries() ([]fs.DirEntry, error) { return d.f.ReadDir(-1) }

// Path is the path of the directory's entry name.
func (d *Dir) Path(name string) string { return filepath.Join(d.path, name) }

// Open opens the directory's entry name as OpenFile opens a path: without
// following a link or blocking on a FIFO, and only if it is a regular
// file.
func (d *Dir) Open(name string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := openRetry(func() (int, error) {
		return unix.Openat(d.fd, name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
	})
	if err != nil {
		var st unix.Stat_t
		if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
			return nil, &NotRegularError{Path: d.Path(name), What: typeOfStat(uint32(st.Mode))}
		}
		return nil, &fs.PathError{Op: "open", Path: d.Path(name), Err: err}
	}
	return regularFile(fd, d.Path(name))
}

// Remove removes the directory's entry name (a file, never what a link
// points to).
func (d *Dir) Remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: d.Path(name), Err: err}
	}
	return nil
}

// Close closes the directory.
func (d *Dir) Close() error { return d.f.Close() }

// regularFile makes an *os.File of fd if fstat says it is a regular file
// (and closes it otherwise), blocking again.
func regularFile(fd int, p string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &NotRegularError{Path: p, What: typeOfStat(uint32(st.Mode))}
	}
	unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), p), nil
}

func typeOfStat(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return TypeName(fs.ModeSymlink)
	case unix.S_IFIFO:
		return TypeName(fs.ModeNamedPipe)
	case unix.S_IFSOCK:
		return TypeName(fs.ModeSocket)
	case unix.S_IFCHR, unix.S_IFBLK:
		return TypeName(fs.ModeDevice)
	case unix.S_IFDIR:
		return TypeName(fs.ModeDir)
	case unix.S_IFREG:
		return TypeName(0)
	}
	return TypeName(fs.ModeIrregular)
}

func openRetry(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// TryLock takes the flock how (syscall.LOCK_SH or syscall.LOCK_EX) on f
// without waiting: false when another open file holds a lock that
// conflicts. The lock lasts until f is closed (or unlocked).
func TryLock(f *os.File, how int) (bool, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), how|syscall.LOCK_NB)
			if lerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	if lerr == syscall.EWOULDBLOCK {
		return false, nil
	}
	if lerr != nil {
		return false, &fs.PathError{Op: "flock", Path: f.Name(), Err: lerr}
	}
	return true, nil
}

// Rename renames the directory's entry from to to (the entry itself,
// whatever it is).
func (d *Dir) Rename(from, to string) error {
	if err := unix.Renameat(d.fd, from, d.fd, to); err != nil {
		return &os.LinkError{Op: "rename", Old: d.Path(from), New: d.Path(to), Err: err}
	}
	return nil
}

// Chtimes sets the access and modification times of the directory's
// entry name to t, without following a link.
func (d *Dir) Chtimes(name string, t time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	if err := unix.UtimesNanoAt(d.fd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "chtimes", Path: d.Path(name), Err: err}
	}
	return nil
}
