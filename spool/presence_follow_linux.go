package spool

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/watcher"
)

// The inotify follower of presence (see presence_follow.go). One inotify
// instance watches presence/ (or, until presence/ exists, the store's
// directory for it to appear) and every presence/<agent>/ directory.

const (
	// rootMask: agent directories that come and go.
	rootMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_MOVED_FROM |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW
	// agentMask: waits renamed into view, removed, and the waiter's
	// close of its file (its death, or the end of a release).
	agentMask = unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_CLOSE_WRITE |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW
	// storeMask: presence/ appearing in the store's directory.
	storeMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW
)

// presenceNotifier is an armed inotify instance. Its maps belong to the
// goroutine that reads the instance (after run starts it).
type presenceNotifier struct {
	s     *Store
	f     *os.File
	fd    int
	root  string
	store int            // the watch on the store's directory, -1 if none
	rootW int            // the watch on presence/, -1 if none
	dirs  map[int]string // the watches on agent directories, by agent
	wake  chan struct{}

	mu      sync.Mutex
	waiting map[string]bool // files whose lock is being waited for
}

// notifyPresence arms the watches and scans the directories they cover.
func (s *Store) notifyPresence() (*presenceNotifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	n := &presenceNotifier{s: s, fd: fd, f: os.NewFile(uintptr(fd), "inotify"), root: filepath.Join(s.dir, presenceDir),
		store: -1, rootW: -1, dirs: map[int]string{}, wake: make(chan struct{}, 1), waiting: map[string]bool{}}
	if err := n.armRoot(); err != nil {
		n.f.Close()
		return nil, err
	}
	return n, nil
}

// armRoot watches presence/ and each agent directory in it, or, while
// there is no presence/, the store's directory for it to appear.
func (n *presenceNotifier) armRoot() error {
	w, err := unix.InotifyAddWatch(n.fd, n.root, rootMask)
	if errors.Is(err, unix.ENOENT) {
		if n.store < 0 {
			if n.store, err = unix.InotifyAddWatch(n.fd, n.s.dir, storeMask); err != nil {
				return err
			}
		}
		// It may have appeared before the watch on the store did.
		if w, err = unix.InotifyAddWatch(n.fd, n.root, rootMask); errors.Is(err, unix.ENOENT) {
			return nil
		}
	}
	if err != nil {
		return err
	}
	n.rootW = w
	if n.store >= 0 {
		unix.InotifyRmWatch(n.fd, uint32(n.store))
		n.store = -1
	}
	entries, _ := os.ReadDir(n.root)
	for _, e := range entries {
		if err := n.armAgent(e.Name()); err != nil {
			return err
		}
	}
	return nil
}

// armAgent watches presence/<agent>/ (nothing else found in presence/).
func (n *presenceNotifier) armAgent(agent string) error {
	if inbox.ValidateAgent("agent", agent) != nil {
		return nil
	}
	w, err := unix.InotifyAddWatch(n.fd, filepath.Join(n.root, agent), agentMask)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil // gone meanwhile, or not a directory (a link)
	}
	if err != nil {
		return err
	}
	n.dirs[w] = agent
	return nil
}

func (n *presenceNotifier) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run calls fn now that the watches are armed, then after each change.
func (n *presenceNotifier) run(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.read()
	}()
	defer func() {
		n.f.Close() // ends read
		<-done
	}()
	fn()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.wake:
			fn()
		case <-done:
			// The instance failed: nothing is followed any more. Say
			// so to the reader once, and poll from now on.
			fn()
			return n.s.pollPresence(ctx, watcher.DefaultPoll, fn)
		}
	}
}

// read handles the instance's events until it is closed or fails.
func (n *presenceNotifier) read() {
	buf := make([]byte, 64<<10)
	for {
		k, err := n.f.Read(buf)
		if err != nil {
			return
		}
		changed := false
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			name := string(bytes.TrimRight(nameBytes, "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if n.handle(int(ev.Wd), ev.Mask, name) {
				changed = true
			}
		}
		if changed {
			n.signal()
		}
	}
}

// handle takes in one event and reports whether presence may have
// changed.
func (n *presenceNotifier) handle(wd int, mask uint32, name string) bool {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		// Events were lost: watch whatever appeared, and let the
		// caller read everything again.
		n.rearm()
		return true
	}
	switch {
	case wd == n.store && n.store >= 0:
		if name == presenceDir {
			n.rearm()
			return true
		}
		return false
	case wd == n.rootW && n.rootW >= 0:
		if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 {
			n.rearm()
			return true
		}
		if mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
			if err := n.armAgent(name); err != nil {
				return true
			}
		}
		return true // an agent's directory came or went
	}
	agent, ok := n.dirs[wd]
	if !ok {
		return false
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(n.dirs, wd)
		return true
	}
	if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
		return true
	}
	if name == "" || strings.HasPrefix(name, ".") {
		return false // a wait being created
	}
	if mask&unix.IN_CLOSE_WRITE != 0 {
		n.awaitUnlock(filepath.Join(n.root, agent, name))
		return false
	}
	return true // a wait renamed into view, or removed
}

// rearm drops every watch and arms them again from a scan: after an
// overflow, or when presence/ itself came or went.
func (n *presenceNotifier) rearm() {
	for w := range n.dirs {
		unix.InotifyRmWatch(n.fd, uint32(w))
	}
	clear(n.dirs)
	if n.rootW >= 0 {
		unix.InotifyRmWatch(n.fd, uint32(n.rootW))
		n.rootW = -1
	}
	n.armRoot() // a failure leaves less watched; the next overflow retries
}

// awaitUnlock signals once the lock of wait file p is free: its waiter
// closed it, and the kernel reports that close just before it drops the
// lock. A file whose lock is already being waited for, or that is gone
// (a release removes its file before the close), needs nothing more.
func (n *presenceNotifier) awaitUnlock(p string) {
	n.mu.Lock()
	if n.waiting[p] {
		n.mu.Unlock()
		return
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		n.mu.Unlock()
		return
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		n.mu.Unlock()
		return
	}
	if unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB) == nil {
		unix.Close(fd) // free already: the waiter is gone
		n.mu.Unlock()
		n.signal()
		return
	}
	n.waiting[p] = true
	n.mu.Unlock()
	// Not yet free: wait for it on a thread of its own (a lock cannot
	// be waited for through the poller). It is free in microseconds when
	// the close was the waiter's; a close by anyone else who opened the
	// file for writing keeps this thread until the wait ends.
	go func() {
		for unix.Flock(fd, unix.LOCK_SH) == unix.EINTR {
		}
		unix.Close(fd)
		n.mu.Lock()
		delete(n.waiting, p)
		n.mu.Unlock()
		n.signal()
	}()
}
