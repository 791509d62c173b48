package spool

import (
	"context"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/watcher"
)

// Following presence (SPEC §15). A wait begins when its file is renamed
// into presence/<agent>/ and ends normally when the file is removed;
// both are directory events. A waiter that dies leaves its file behind
// and the kernel drops its lock, which no directory event shows: but the
// waiter held the file open for writing, so the kernel's closing of it
// is an inotify IN_CLOSE_WRITE on the file (fsnotify does not expose
// close events, hence inotify itself, presence_follow_linux.go). The
// kernel reports that close before it drops the lock, so the follower
// then takes a shared lock of the file, blocking until the lock is free,
// before it tells anyone. Readers of presence files open them read-only,
// so that their closes are not taken for a waiter's.
//
// Where inotify is unavailable (another system, the instance or watch
// limit reached, ForcePoll), the follower polls the presence tree every
// watcher.DefaultPoll, as waiters poll the event log then.

// errNoInotify is the fallback reason on systems without inotify.
var errNoInotify = errors.New("presence is followed with inotify, which this system does not have")

// FollowPresence calls fn after every wait that starts or ends, and
// every waiter that dies, until ctx ends (see inbox.Bus). It never
// writes to the store: presence/ need not exist yet.
func (s *Store) FollowPresence(ctx context.Context, opt inbox.WaitOptions, fn func()) error {
	if s.linkErr != nil {
		return s.linkErr
	}
	reason := error(watcher.ErrForcedPoll)
	if !opt.ForcePoll {
		n, err := s.notifyPresence()
		if err == nil {
			return n.run(ctx, fn)
		}
		reason = err
	}
	if opt.OnFallback != nil {
		opt.OnFallback(reason)
	}
	return s.pollPresence(ctx, watcher.DefaultPoll, fn)
}

// pollPresence calls fn once, then whenever the presence tree's print
// (every wait file and whether its process still holds it) changes.
func (s *Store) pollPresence(ctx context.Context, every time.Duration, fn func()) error {
	was := s.presencePrint()
	fn()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if p := s.presencePrint(); p != was {
				was = p
				fn()
			}
		}
	}
}

// presencePrint sums the names of the wait files in view and which of
// them a live process holds.
func (s *Store) presencePrint() uint64 {
	h := fnv.New64a()
	root := filepath.Join(s.dir, presenceDir)
	agents, _ := os.ReadDir(root)
	for _, a := range agents {
		if inbox.ValidateAgent("agent", a.Name()) != nil || !a.IsDir() {
			continue
		}
		entries, _ := os.ReadDir(filepath.Join(root, a.Name()))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue // being created
			}
			state := "/gone\n"
			if heldByWaiter(filepath.Join(root, a.Name(), e.Name())) {
				state = "/live\n"
			}
			h.Write([]byte(a.Name() + "/" + e.Name() + state))
		}
	}
	return h.Sum64()
}

// heldByWaiter reports whether the process that made wait file p still
// holds its lock.
func heldByWaiter(p string) bool {
	lk := flock.New(p, flock.SetFlag(os.O_RDONLY))
	ok, err := lk.TryRLock()
	if err != nil {
		return false // removed meanwhile
	}
	if ok {
		lk.Unlock()
	}
	return !ok
}
