package spool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox"
)

// DefaultLockTimeout bounds every wait for one of the store's locks
// (SPEC §8): a stopped writer (SIGSTOP, a debugger) holding a lock makes
// the others fail, naming the lock and its holder, instead of waiting
// forever in silence.
const DefaultLockTimeout = 30 * time.Second

// lockWithin takes lk, waiting at most timeout (0: DefaultLockTimeout).
// An uncontended lock costs one non-blocking flock; a contended one is
// waited for by a blocking flock, so it is had the moment its holder lets
// go. A lock file planted by someone else (a link, a FIFO) is refused
// (safeopen.go). A lock still held at the deadline is an ErrStorage error of code
// lock_timeout naming what (the lock, in words) and, where /proc/locks
// tells, the process holding it. When ctx ends first the wait stops at
// once and the error wraps ctx's (context.Canceled for an interrupt).
func lockWithin(ctx context.Context, lk *flock.Flock, what string, timeout time.Duration) error {
	ok, err := tryLock(lk)
	if err != nil {
		return inbox.Storage(err, "lock %s", what)
	}
	if ok {
		return nil
	}
	timedOut, err := waitBounded(ctx, lk.Lock, func() { lk.Unlock() }, timeout)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("wait for the %s lock: %w", what, err)
	}
	if timedOut {
		return lockTimeoutError(lk.Path(), what, orDefault(timeout))
	}
	if err != nil {
		return inbox.Storage(err, "lock %s", what)
	}
	return checkLocked(lk)
}

// waitBounded runs the blocking acquire, giving up after timeout (0:
// DefaultLockTimeout) or when ctx ends (then err is ctx's error). A flock
// cannot be interrupted, so acquire goes on
// in its own goroutine; one that succeeds after the caller gave up
// releases at once, so an abandoned wait never ends up holding the lock.
func waitBounded(ctx context.Context, acquire func() error, release func(), timeout time.Duration) (timedOut bool, err error) {
	timeout = orDefault(timeout)
	var mu sync.Mutex
	abandoned := false
	done := make(chan error, 1)
	go func() {
		err := acquire()
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if err == nil {
				release()
			}
			return
		}
		done <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	var cause error
	select {
	case err := <-done:
		return false, err
	case <-t.C:
	case <-ctx.Done():
		cause = ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case err := <-done:
		return false, err
	default:
		abandoned = true
		return cause == nil, cause
	}
}

// lockWithin takes lk within the store's lock timeout.
func (s *Store) lockWithin(ctx context.Context, lk *flock.Flock, what string) error {
	return lockWithin(ctx, lk, what, s.lockTimeout)
}

// lockTimeoutError says which lock could not be had and who holds it.
func lockTimeoutError(path, what string, timeout time.Duration) error {
	holder := ""
	if pid := lockHolder(path); pid > 0 {
		holder = fmt.Sprintf(" by process %d", pid)
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
			holder += " (" + strings.TrimSpace(string(comm)) + ")"
		}
		if st := procState(pid); st == "T" || st == "t" {
			holder += ", which is stopped"
		}
	}
	return inbox.Errorf(inbox.ErrStorage, "lock_timeout", "",
		"the %s lock (%s) is held%s and was not released within %s: a stopped or stuck writer holds it; end or resume that process, or raise --lock-timeout",
		what, path, holder, timeout)
}

// lockHolder returns the pid that /proc/locks shows holding an flock on
// the file at path, or 0 when it cannot tell.
func lockHolder(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	ino := strconv.FormatUint(uint64(st.Ino), 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[2] == "->" {
			continue
		}
		id := strings.Split(fields[5], ":")
		if len(id) != 3 || id[2] != ino {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil {
			return pid
		}
	}
	return 0
}

// procState is the one-letter state of process pid ("T" when stopped).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// orDefault is timeout, or DefaultLockTimeout for 0.
func orDefault(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return DefaultLockTimeout
	}
	return timeout
}
