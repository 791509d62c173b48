package spool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox"
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
	root := filepath.Join(s.dir, presenceDir)
	agents, err := os.ReadDir(root)
	if err != nil {
		return out, nil // no one has waited yet
	}
	for _, a := range agents {
		if inbox.ValidateAgent("agent", a.Name()) != nil {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, a.Name()))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue // being created
			}
			if w, ok := liveWait(filepath.Join(root, a.Name(), e.Name())); ok {
				w.Agent = a.Name()
				out = append(out, w)
			}
		}
	}
	slices.SortFunc(out, func(a, b inbox.WaitInfo) int {
		return strings.Compare(a.Since+a.Agent, b.Since+b.Agent)
	})
	return out, nil
}

// liveWait reads the wait of presence file p while its process still
// holds the lock; ok is false for an ended or dead wait, or a plain one.
func liveWait(p string) (w inbox.WaitInfo, ok bool) {
	lk := flock.New(p, flock.SetFlag(os.O_RDONLY))
	locked, err := lk.TryRLock()
	if err != nil {
		return w, false // removed meanwhile: the wait ended
	}
	if locked {
		lk.Unlock() // its process is gone
		return w, false
	}
	data, err := readFile(p)
	if err != nil || len(data) == 0 || json.Unmarshal(data, &w) != nil {
		return w, false
	}
	return w, w.Reason != ""
}
