package spool

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/safefile"
)

// Waits on someone (SPEC §15's wait graph). A wait that says what it is
// on (WaitingOn) is a presence file like any other (presence.go), whose
// content is the inbox.WaitInfo as JSON; a plain wait's file is empty.
// The lock its process holds says it is still in progress.

// WaitingOn records that this process waits for w.Agent, on what w names,
// until release is called. It is best effort, as Waiting is.
func (s *Store) WaitingOn(ctx context.Context, w inbox.WaitInfo) (release func()) {
	w.Since = inbox.FormatTime(s.now())
	data, err := json.Marshal(w)
	if err != nil {
		return func() {}
	}
	return s.waitingWith(w.Agent, data).Release
}

// Waits lists the waits in progress that recorded what they are on,
// oldest first.
func (s *Store) Waits(ctx context.Context) ([]inbox.WaitInfo, error) {
	out := []inbox.WaitInfo{}
	eachPresence(filepath.Join(s.dir, presenceDir), func(agent string, d *safefile.Dir) {
		eachWait(d, func(name string) {
			if w, ok := liveWait(d, name); ok {
				w.Agent = agent
				out = append(out, w)
			}
		})
	})
	slices.SortFunc(out, func(a, b inbox.WaitInfo) int {
		return strings.Compare(a.Since+a.Agent, b.Since+b.Agent)
	})
	return out, nil
}

// maxWaitFile bounds what is read of a wait file: an inbox.WaitInfo is a
// few hundred bytes.
const maxWaitFile = 64 << 10

// liveWait reads the wait of presence file name in d while its process
// still holds the lock; ok is false for an ended or dead wait, a plain
// one, or a file that is no wait.
func liveWait(d *safefile.Dir, name string) (w inbox.WaitInfo, ok bool) {
	f, held, err := probeWait(d, name)
	if err != nil {
		return w, false // removed meanwhile (the wait ended), or planted
	}
	defer f.Close()
	if !held {
		return w, false // its process is gone
	}
	data, err := io.ReadAll(io.LimitReader(f, maxWaitFile+1))
	if err != nil || len(data) == 0 || len(data) > maxWaitFile || json.Unmarshal(data, &w) != nil {
		return w, false
	}
	return w, w.Reason != ""
}
