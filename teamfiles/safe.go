package teamfiles

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/inbox-dev/inbox/internal/safefile"
)

// Nothing inside a team directory is followed or opened blocking when it
// is not what the bridge (or the tools it shares the files with) would
// have made (SPEC §8): every file is opened with O_NOFOLLOW and
// O_NONBLOCK and used only if it is a regular file, and every directory
// below the team directory is checked to be a directory, not a symlink.
// A symlink, FIFO, socket or device planted in place of one is refused
// (errUnsafe): never written through, never read through, and a reader
// never hangs on it. The team directory itself (Config.Dir) is the user's
// choice and may be a symlink.

// errUnsafe is what an unsafeError wraps: a file or directory in a team
// directory that the bridge refuses to use.
var errUnsafe = errors.New("not a regular file or directory")

// unsafeError names a refused path and what it is.
type unsafeError struct {
	path string
	what string // "a symlink", "a FIFO", …
	want string // "a regular file" or "a directory"
}

func (e *unsafeError) Error() string {
	return fmt.Sprintf("%s is %s, not %s: refused (the bridge never follows or opens it; remove it, or inbox fsck --repair sets it aside)",
		e.path, e.what, e.want)
}

func (e *unsafeError) Unwrap() error { return errUnsafe }

// typeName says what a file of mode is.
func typeName(mode fs.FileMode) string { return safefile.TypeName(mode) }

// openFile opens p like os.OpenFile (flag, and perm for a file it
// creates) but never follows a symlink at p, never blocks on a FIFO, and
// returns only a regular file: anything else is an *unsafeError.
func openFile(p string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := safefile.OpenFile(p, flag, perm)
	var nr *safefile.NotRegularError
	if errors.As(err, &nr) {
		return nil, &unsafeError{path: p, what: nr.What, want: "a regular file"}
	}
	return f, err
}

// readFile is os.ReadFile through openFile.
func readFile(p string) ([]byte, error) {
	f, err := openFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// regularOrMissing returns an *unsafeError when something other than a
// regular file is at p; nil when a regular file or nothing is.
func regularOrMissing(p string) error {
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode().IsRegular() {
		return nil
	}
	return &unsafeError{path: p, what: typeName(fi.Mode()), want: "a regular file"}
}

// dirAt returns root joined with parts after checking that each of parts
// is a directory, not a symlink or anything else (an *unsafeError names
// the first that is not). With create, missing ones are made (0700).
func dirAt(create bool, root string, parts ...string) (string, error) {
	p := root
	for _, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if create && errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
			fi, err = os.Lstat(p)
		}
		if err != nil {
			return "", err
		}
		if !fi.IsDir() {
			return "", &unsafeError{path: p, what: typeName(fi.Mode()), want: "a directory"}
		}
	}
	return p, nil
}

// fileLock is an flock held on an open lock file.
type fileLock struct{ f *os.File }

// lockPath takes an exclusive flock on the lock file p (made 0600 when
// missing), opened through openFile: a symlink or FIFO planted as the
// lock file is refused, not followed.
func lockPath(p string) (*fileLock, error) {
	f, err := openFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return &fileLock{f: f}, nil
}

// tryLockPath is lockPath that does not wait: ok is false, with no lock,
// while another process holds it.
func tryLockPath(p string) (l *fileLock, ok bool, err error) {
	f, err := openFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, false, nil
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("lock %s: %w", p, err)
	}
	return &fileLock{f: f}, true, nil
}

// Unlock releases the lock.
func (l *fileLock) Unlock() error {
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}

// setAside renames a refused path to path.bad (or path.bad-N when that
// is taken), so that the bridge can make a sound file or directory in its
// place; the rename moves the planted entry itself, never its target.
func setAside(p string) error {
	dst := p + ".bad"
	for i := 1; ; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dst = p + ".bad-" + strconv.Itoa(i)
	}
	return os.Rename(p, dst)
}

// refusals logs each refused path once, as an error, rather than at every
// sweep; other errors are logged as warnings every time. It belongs to
// the bridge's loop.
type refusals struct {
	seen map[string]bool
}

// report logs err under msg (with args).
func (r *refusals) report(log *slog.Logger, msg string, err error, args ...any) {
	var ue *unsafeError
	if !errors.As(err, &ue) {
		log.Warn(msg, append(args, "error", err)...)
		return
	}
	first := !r.seen[ue.Error()]
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[ue.Error()] = true
	if first {
		log.Error(msg+": refused", append(args, "path", ue.path, "error", err)...)
	}
}
