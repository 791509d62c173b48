package spool

import (
	"context"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/safefile"
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
	eachPresence(filepath.Join(s.dir, presenceDir), func(agent string, d *safefile.Dir) {
		eachWait(d, func(name string) {
			state := "/gone\n"
			if f, held, err := probeWait(d, name); err == nil {
				f.Close()
				if held {
					state = "/live\n"
				}
			}
			h.Write([]byte(agent + "/" + name + state))
		})
	})
	return h.Sum64()
}

// eachPresence calls fn with each agent's presence directory under root
// (presence/), open; what is not a directory there (a planted link or
// FIFO) is skipped, for fsck to report.
func eachPresence(root string, fn func(agent string, d *safefile.Dir)) {
	r, err := safefile.OpenDir(root)
	if err != nil {
		return // no one has waited yet, or planted
	}
	defer r.Close()
	agents, _ := r.Entries()
	slices.SortFunc(agents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, a := range agents {
		if !a.IsDir() || inbox.ValidateAgent("agent", a.Name()) != nil {
			continue
		}
		d, err := safefile.OpenDir(r.Path(a.Name()))
		if err != nil {
			continue
		}
		fn(a.Name(), d)
		d.Close()
	}
}
