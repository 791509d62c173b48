package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/index"
)

// indexErr is a failure to read the index: when the index is missing or
// incomplete, an error that says so and how to rebuild it (never an
// empty answer, which would read as "no work").
func (s *Store) indexErr(err error) error {
	if errors.Is(err, index.ErrMissing) {
		return &inbox.Error{Code: "index_missing", Err: inbox.ErrFormat, Cause: err, Rule: fmt.Sprintf(
			"the index of store %s is missing or incomplete (%v), so it cannot say what work there is; rebuild it with inbox reindex",
			s.dir, strings.TrimPrefix(err.Error(), index.ErrMissing.Error()+": "))}
	}
	return inbox.Storage(err, "read index")
}

// Reindex rebuilds the index from the thread headers alone, and the
// search index from their messages, with the store locked. It returns
// the number of threads indexed.
func (s *Store) Reindex(ctx context.Context) (int, error) {
	unlock, err := s.lockAll(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	n, err := s.rebuildIndex()
	if err != nil {
		return n, err
	}
	return n, s.reindexSearch(ctx)
}

// rebuildIndex rebuilds the index from nothing; the caller holds every
// lock. Until it finishes, readers refuse the index (index.ErrMissing).
func (s *Store) rebuildIndex() (int, error) {
	if err := s.idx.Reset(); err != nil {
		return 0, inbox.Storage(err, "clear index")
	}
	tids, err := s.threadIDs()
	if err != nil {
		return 0, err
	}
	var ss syncSet
	ss.add(filepath.Join(s.dir, indexDirName))
	n := 0
	for _, tid := range tids {
		h, err := s.readHeader(tid)
		if errors.Is(err, inbox.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		dirs, err := s.idx.Add(entryOf(h), filepath.Join(s.threadDir(tid), msgName(1)))
		if err != nil {
			return n, inbox.Storage(err, "index thread %s", tid)
		}
		ss.add(dirs...)
		n++
	}
	if err := ss.flush(); err != nil {
		return n, err
	}
	return n, inbox.Storage(s.idx.Rebuilt(), "finish the index")
}

// Archive moves terminal threads (statuses, all terminal; default done,
// failed, cancelled) last updated before now-olderThan out of the live
// tree into archive/threads, where Show still reads them, and moves
// event-log segments whose events are all older than the cutoff into
// archive/events. Nothing is deleted. It runs with the store locked.
func (s *Store) Archive(ctx context.Context, olderThan time.Duration, statuses []string) (*inbox.ArchiveResult, error) {
	statuses, err := inbox.PrepareArchive(olderThan, statuses)
	if err != nil {
		return nil, err
	}
	unlock, err := s.lockAll(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// What is archived is durable first: replay after a power cut
	// restores live threads only, so an archived thread's files must not
	// depend on it.
	if !s.unsynced && s.checkpointEvery >= 0 {
		if err := s.checkpointLocked(); err != nil {
			return nil, err
		}
	}
	cutoff := s.now().Add(-olderThan)
	res := &inbox.ArchiveResult{Cutoff: inbox.FormatTime(cutoff), Threads: []string{}, Segments: []string{}}
	archThreads := filepath.Join(s.dir, archiveDir, threadsDir)
	archEvents := filepath.Join(s.dir, archiveDir, eventsDir)
	for _, d := range []string{filepath.Join(s.dir, archiveDir), archThreads, archEvents} {
		if err := os.Mkdir(d, s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, inbox.Storage(err, "create %s", d)
		}
	}
	entries, err := s.idx.ByStatus(statuses)
	if err != nil {
		return nil, s.indexErr(err)
	}
	for _, e := range entries {
		h, err := s.readHeader(e.ThreadID)
		if errors.Is(err, inbox.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		updated, err := inbox.ParseTime(h.UpdatedAt)
		if err != nil || !slices.Contains(statuses, h.Status) || !updated.Before(cutoff) {
			continue
		}
		if err := os.Rename(s.threadDir(h.ThreadID), filepath.Join(archThreads, h.ThreadID)); err != nil {
			return nil, inbox.Storage(err, "archive thread %s", h.ThreadID)
		}
		res.Threads = append(res.Threads, h.ThreadID)
	}
	if len(res.Threads) > 0 {
		for _, d := range []string{s.threadsRoot(), archThreads} {
			if err := syncDir(d); err != nil {
				return nil, err
			}
		}
		// Their markers go last: a crash before this leaves stale markers,
		// which readers skip and fsck removes.
		if err := s.removeMarkers(res.Threads); err != nil {
			return nil, err
		}
	}
	segs, err := s.archiveSegments(cutoff, archEvents)
	if err != nil {
		return nil, err
	}
	res.Segments = segs
	return res, nil
}

// removeMarkers removes every index marker of the given threads.
func (s *Store) removeMarkers(tids []string) error {
	gone := map[string]bool{}
	for _, t := range tids {
		gone[t] = true
	}
	type marker struct {
		e    index.Entry
		path string
	}
	var stale []marker
	err := s.idx.Walk(func(e index.Entry, path string) {
		if gone[e.ThreadID] {
			stale = append(stale, marker{e, path})
		}
	})
	if err != nil {
		return s.indexErr(err)
	}
	for _, m := range stale {
		s.idx.RemoveMarker(m.e, m.path)
	}
	return nil
}

// archiveSegments moves every segment whose events all precede cutoff to
// dir. When the newest segment qualifies, the log first starts a new one,
// so that even a quiet store's log stops growing.
func (s *Store) archiveSegments(cutoff time.Time, dir string) ([]string, error) {
	segs, err := s.log.segments()
	if err != nil {
		return nil, err
	}
	last := segs[len(segs)-1]
	if newest, ok, err := s.log.lastTime(last); err != nil {
		return nil, err
	} else if ok && newest.Before(cutoff) {
		id, _, err := s.log.lastID()
		if err != nil {
			return nil, err
		}
		nf, err := openFile(s.log.segPath(id+1), os.O_CREATE|os.O_EXCL|os.O_WRONLY, s.fileMode)
		if err != nil {
			return nil, inbox.Storage(err, "start event log segment")
		}
		nf.Close()
		if err := syncDir(s.log.dir); err != nil {
			return nil, err
		}
		segs = append(segs, id+1)
	}
	moved := []string{}
	for _, first := range segs[:len(segs)-1] {
		newest, ok, err := s.log.lastTime(first)
		if err != nil {
			return nil, err
		}
		if ok && !newest.Before(cutoff) {
			break // segments are in time order: the rest are newer
		}
		name := segmentName(first)
		if err := os.Rename(s.log.segPath(first), filepath.Join(dir, name)); err != nil {
			return nil, inbox.Storage(err, "archive segment %s", name)
		}
		moved = append(moved, name)
	}
	if len(moved) > 0 {
		if err := syncDir(s.log.dir); err != nil {
			return nil, err
		}
		if err := syncDir(dir); err != nil {
			return nil, err
		}
	}
	return moved, nil
}

// lastTime returns the created_at of a segment's last valid event.
func (l *eventLog) lastTime(first int64) (time.Time, bool, error) {
	f, err := openRead(l.segPath(first))
	if err != nil {
		return time.Time{}, false, inbox.Storage(err, "open event log")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return time.Time{}, false, inbox.Storage(err, "stat event log")
	}
	body, _, err := lastLine(f, fi.Size(), l.lineMax(), true, func(b []byte) bool { _, ok := lineID(b); return ok })
	if err != nil || body == nil {
		return time.Time{}, false, err
	}
	const key = `"created_at":"`
	i := strings.Index(string(body), key)
	if i < 0 {
		return time.Time{}, false, nil
	}
	rest := string(body[i+len(key):])
	end := strings.IndexByte(rest, '"')
	if end < 0 {
		return time.Time{}, false, nil
	}
	t, err := inbox.ParseTime(rest[:end])
	return t, err == nil, nil
}

// Stats counts threads by status and assignee (from the index), measures
// the store and the event log on disk, and finds the oldest pending thread.
func (s *Store) Stats(ctx context.Context) (*inbox.Stats, error) {
	st := &inbox.Stats{ByStatus: map[string]int{}, ByAgent: map[string]map[string]int{}}
	// The status tree lists every thread (a superset); each hit is checked
	// against its header, as every reader of the index must.
	entries, err := s.idx.ByStatus(inbox.Statuses)
	if err != nil {
		return nil, s.indexErr(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.ThreadID] {
			continue
		}
		h, err := s.readHeader(e.ThreadID)
		if err != nil || h.Status != e.Status {
			continue // gone, or a stale marker: the right one counts
		}
		seen[e.ThreadID] = true
		st.Count(&h.Thread)
	}
	if entries, err := os.ReadDir(filepath.Join(s.dir, archiveDir, threadsDir)); err == nil {
		st.ArchivedThreads = len(entries)
	}
	segs, err := s.log.segments()
	if err != nil {
		return nil, err
	}
	st.EventSegments = len(segs)
	for _, first := range segs {
		if fi, err := os.Stat(s.log.segPath(first)); err == nil {
			st.EventLogBytes += fi.Size()
		}
	}
	if st.LastEventID, _, err = s.log.lastID(); err != nil {
		return nil, err
	}
	err = filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed while we walk
		}
		if fi, err := d.Info(); err == nil {
			st.StoreBytes += diskUsage(fi)
		}
		return nil
	})
	return st, err
}
