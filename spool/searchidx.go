package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/searchindex"
)

// The search index: derived data, kept in two files of index/ in the
// format of package searchindex,
//
//	index/search-base.idx   the messages up to some event
//	index/search-delta.idx  those after it, up to a later event; it names
//	                        the base it adds to by the base's checksum
//
// Writers pay nothing for it: a search brings it up to date. Each file
// says how far into the event log it reaches (searchindex.Covered); a
// search that finds the log longer reads the events past that point
// (their lines carry the messages they add), files the messages they add,
// and saves the result as a new delta, or as a new base once the delta
// would hold more than an eighth of the base. The files are written to
// tmp/ and renamed into place, without fsync: after a power cut a file
// may be empty or stale, which its checksum and its covered line tell,
// and the next search rebuilds it. Updates take locks/search.lock, so
// that concurrent searches do the work once; readers take no lock (every
// file is whole, and a delta of another base is ignored).
//
// A base is rebuilt from the live threads' message files when it is
// missing or damaged, or when the log no longer holds the line it reaches
// to (another line there after a power cut rolled changes back, or the
// segment archived): the log may no longer hold old events, the threads
// always hold every live message.

const (
	searchBaseFile  = "search-base.idx"
	searchDeltaFile = "search-delta.idx"
	searchLockFile  = "search.lock"
	// minSearchDelta is the size (documents) under which a delta is never
	// merged into its base.
	minSearchDelta = 4096
)

// searchIndex is the index as loaded.
type searchIndex struct {
	base, delta *searchindex.Segment
	// damaged names the files that were there but could not be read.
	damaged []string
}

func (s *Store) searchFile(name string) string { return filepath.Join(s.dir, indexDirName, name) }

// segments are the index's files, the newest first.
func (ix *searchIndex) segments() []*searchindex.Segment {
	var out []*searchindex.Segment
	for _, seg := range []*searchindex.Segment{ix.delta, ix.base} {
		if seg != nil {
			out = append(out, seg)
		}
	}
	return out
}

// covered is how far the index reaches into the log.
func (ix *searchIndex) covered() searchindex.Covered {
	if ix.delta != nil {
		return ix.delta.Meta.Covered
	}
	return ix.base.Meta.Covered
}

// loadSearchIndex reads the index's files. A missing or damaged base
// leaves base nil (and so the delta); a delta that is damaged or adds to
// another base is left out. Errors other than a missing file count as
// damage: the index is derived, so a file it cannot read is rebuilt.
//
// A process keeps the files it last read of each store (searchCache) and
// reads them again only when they were replaced, so that a long-lived
// process (the MCP server, the dashboard) pays for a search alone.
func (s *Store) loadSearchIndex() *searchIndex {
	id := s.searchFileIDs()
	searchCache.Lock()
	c := searchCache.byDir[s.dir]
	searchCache.Unlock()
	if c != nil && c.id.same(id) {
		return c.ix
	}
	ix := s.readSearchIndex()
	if len(ix.damaged) == 0 && ix.base != nil {
		searchCache.Lock()
		if searchCache.byDir == nil {
			searchCache.byDir = map[string]*cachedSearch{}
		}
		searchCache.byDir[s.dir] = &cachedSearch{id: id, ix: ix}
		searchCache.Unlock()
	}
	return ix
}

// searchCache holds, per store directory, the index files this process
// read last. The files are never written in place, only replaced by a
// rename, so a file that has the inode, size and time it had is the one
// read; the identities are taken before the files are read, so that a
// file replaced meanwhile is read again next time, never missed.
var searchCache struct {
	sync.Mutex
	byDir map[string]*cachedSearch
}

type cachedSearch struct {
	id searchFileIDs
	ix *searchIndex
}

// searchFileIDs identify the base and delta files (nil: not there).
type searchFileIDs [2]os.FileInfo

func (s *Store) searchFileIDs() searchFileIDs {
	var id searchFileIDs
	for i, name := range []string{searchBaseFile, searchDeltaFile} {
		if fi, err := os.Lstat(s.searchFile(name)); err == nil {
			id[i] = fi
		}
	}
	return id
}

func (id searchFileIDs) same(o searchFileIDs) bool {
	for i := range id {
		a, b := id[i], o[i]
		if (a == nil) != (b == nil) || a != nil && !(os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())) {
			return false
		}
	}
	return true
}

// readSearchIndex reads the index's files (see loadSearchIndex).
func (s *Store) readSearchIndex() *searchIndex {
	ix := &searchIndex{}
	var base, delta []byte
	var baseErr, deltaErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); delta, deltaErr = readFile(s.searchFile(searchDeltaFile)) }()
	base, baseErr = readFile(s.searchFile(searchBaseFile))
	wg.Wait()
	if baseErr != nil {
		if !errors.Is(baseErr, fs.ErrNotExist) {
			ix.damaged = append(ix.damaged, s.searchFile(searchBaseFile))
		}
		return ix
	}
	var err error
	if ix.base, err = searchindex.Decode(base); err != nil || ix.base.Meta.Base != 0 {
		ix.base = nil
		ix.damaged = append(ix.damaged, s.searchFile(searchBaseFile))
		return ix
	}
	if deltaErr != nil {
		if !errors.Is(deltaErr, fs.ErrNotExist) {
			ix.damaged = append(ix.damaged, s.searchFile(searchDeltaFile))
		}
		return ix
	}
	d, err := searchindex.Decode(delta)
	switch {
	case err != nil:
		ix.damaged = append(ix.damaged, s.searchFile(searchDeltaFile))
	case d.Meta.Base == ix.base.Sum:
		ix.delta = d
	}
	return ix
}

// coveredState says how the log stands against what an index covers:
// stale when the line it reaches to is not the one at that place in the
// log; behind when the log goes on past it.
func (s *Store) coveredState(c searchindex.Covered) (stale, behind bool) {
	p := Pos{Segment: c.Segment, Offset: c.Offset}
	if c.Offset == 0 {
		// The start of a segment (an empty log, or one that archive
		// restarted): it must still be there.
		if _, err := os.Lstat(s.log.segPath(c.Segment)); err != nil {
			return true, false
		}
	} else {
		head, sum, ok, _, err := s.log.headAt(p)
		if err != nil || !ok {
			return true, false
		}
		if id, _ := lineID(head); id != c.EventID || sum != c.LineCRC {
			return true, false
		}
	}
	return false, s.log.continuesAfter(p)
}

// currentSearchIndex returns the index brought up to the end of the log,
// saved for the next search. An index another search is bringing up to
// date is waited for.
func (s *Store) currentSearchIndex(ctx context.Context) (*searchIndex, error) {
	ix := s.loadSearchIndex()
	if ix.base != nil {
		if stale, behind := s.coveredState(ix.covered()); !stale && !behind {
			return ix, nil
		}
	}
	lk := newLock(s.lockFile(searchLockFile), s.fileMode)
	if err := s.lockWithin(ctx, lk, "search index"); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// No lock (a store this user may only read, another process
		// rebuilding for longer than the lock timeout): the index is
		// brought up to date all the same, and its files are left to
		// the next search.
	} else {
		defer lk.Unlock()
	}
	ix, err := s.updateSearchIndex(ctx, false)
	if ix != nil {
		return ix, nil // an index not saved is derived data lost, not a failure
	}
	return nil, err
}

// updateSearchIndex brings the index up to date (rebuilt from the
// threads when it cannot be trusted, or when rebuild says so) and saves
// it; the caller holds the search lock. When only the saving failed it
// returns the index with the error.
func (s *Store) updateSearchIndex(ctx context.Context, rebuild bool) (*searchIndex, error) {
	ix := s.loadSearchIndex() // as another search may have left it
	stale, behind := true, true
	if ix.base != nil && !rebuild {
		stale, behind = s.coveredState(ix.covered())
	}
	var saveErr error
	if stale {
		if ix, saveErr = s.rebuildSearchIndex(ctx); ix == nil {
			return nil, saveErr
		}
		_, behind = s.coveredState(ix.covered())
	}
	if !behind {
		return ix, saveErr
	}
	nix, err := s.catchUpSearchIndex(ctx, ix)
	return nix, errors.Join(saveErr, err)
}

// catchUpSearchIndex files the messages the events past ix's end add,
// and saves the index (see updateSearchIndex for errors).
func (s *Store) catchUpSearchIndex(ctx context.Context, ix *searchIndex) (*searchIndex, error) {
	from := ix.covered()
	b := searchindex.NewBuilder()
	last := from
	var lastEnd Pos
	var scanErr error
	err := s.log.scanFull(Pos{Segment: from.Segment, Offset: from.Offset}, func(ev *logEvent, end Pos) bool {
		if err := s.fileEvent(b, ev); err != nil {
			scanErr = err
			return false
		}
		last.EventID, lastEnd = ev.EventID, end
		return ctx.Err() == nil
	})
	if ctx.Err() != nil {
		return nil, fmt.Errorf("bring the search index up to date: %w", ctx.Err())
	}
	if err = errors.Join(err, scanErr); err != nil {
		return nil, err
	}
	if last.EventID == from.EventID && b.Len() == 0 {
		return ix, nil // a torn tail past the last line: nothing new
	}
	_, sum, ok, _, err := s.log.headAt(lastEnd)
	if err != nil {
		return nil, err
	}
	if !ok {
		return ix, nil // moved away meanwhile: the next search rebuilds
	}
	last.Segment, last.Offset, last.LineCRC = lastEnd.Segment, lastEnd.Offset, sum
	data, err := b.Encode(searchindex.Meta{Covered: last, Base: ix.base.Sum})
	if err != nil {
		return nil, inbox.Storage(err, "build the search index")
	}
	added, err := searchindex.Decode(data)
	if err != nil {
		return nil, inbox.Storage(err, "build the search index")
	}
	if ix.delta != nil {
		if data, err = searchindex.Merge(ix.delta, added, added.Meta); err != nil {
			return nil, inbox.Storage(err, "build the search index")
		}
		if added, err = searchindex.Decode(data); err != nil {
			return nil, inbox.Storage(err, "build the search index")
		}
	}
	if added.Len() <= max(minSearchDelta, ix.base.Len()/8) {
		return &searchIndex{base: ix.base, delta: added}, s.saveSearchFile(searchDeltaFile, data)
	}
	if data, err = searchindex.Merge(ix.base, added, searchindex.Meta{Covered: last}); err != nil {
		return nil, inbox.Storage(err, "build the search index")
	}
	base, err := searchindex.Decode(data)
	if err != nil {
		return nil, inbox.Storage(err, "build the search index")
	}
	return &searchIndex{base: base}, s.saveSearchBase(data)
}

// fileEvent adds to b the message ev adds, if any: the one its line
// carries, or, for a line written without it (a change rolled forward
// after a crash, an event fsck restored), the one its thread holds.
func (s *Store) fileEvent(b *searchindex.Builder, ev *logEvent) error {
	if ev.Message != nil {
		m := &ev.Message.Message
		var subject string
		switch {
		case m.Seq != 1:
		case ev.State != nil:
			subject = ev.State.Subject
		case ev.Message.InitialHeader != nil:
			subject = ev.Message.InitialHeader.Subject
		default:
			h, err := s.readHeader(ev.ThreadID)
			if err != nil {
				return nil // gone: nothing to find
			}
			subject = h.Subject
		}
		fileMessage(b, m, ev.EventID, subject)
		return nil
	}
	if ev.MessageID == "" || ev.EventType == inbox.EventThreadRead || inbox.ValidateID("thread", ev.ThreadID) != nil {
		return nil
	}
	h, err := s.readHeader(ev.ThreadID)
	if err != nil {
		return nil // gone (archived, removed) or damaged: nothing to file
	}
	hint := h.MessageCount
	if ev.State != nil && ev.State.MessageCount <= h.MessageCount {
		hint = ev.State.MessageCount
	}
	if hint >= 1 {
		if m, err := s.readMessageAt(s.threadDir(ev.ThreadID), ev.ThreadID, hint); err == nil && m.MessageID == ev.MessageID {
			fileMessage(b, m, ev.EventID, h.Subject)
			return nil
		}
	}
	msgs, err := s.readMessages(s.threadDir(ev.ThreadID), ev.ThreadID, h.MessageCount)
	if err != nil {
		return nil
	}
	for _, m := range msgs {
		if m.MessageID == ev.MessageID {
			fileMessage(b, m, ev.EventID, h.Subject)
		}
	}
	return nil
}

// fileMessage adds m, a message of the thread with subject, to b; eventID
// stands for the message's own when it has none.
func fileMessage(b *searchindex.Builder, m *inbox.Message, eventID int64, subject string) {
	if m.EventID != 0 {
		eventID = m.EventID
	}
	b.Add(searchindex.Doc{EventID: eventID, Created: searchindex.CreatedMilli(m), ThreadID: m.ThreadID, Seq: m.Seq},
		searchindex.MessageTerms(m, subject))
}

// rebuildSearchIndex makes a new base from the live threads' messages and
// saves it: every message up to the log's last event when it starts
// (later ones a catch-up files from the log). The caller holds the search
// lock. When only the saving failed it returns the index with the error.
func (s *Store) rebuildSearchIndex(ctx context.Context) (*searchIndex, error) {
	lastID, end, err := s.log.lastID()
	if err != nil {
		return nil, err
	}
	cov := searchindex.Covered{EventID: lastID, Segment: end.Segment, Offset: end.Offset}
	if end.Offset != 0 {
		_, sum, ok, _, err := s.log.headAt(end)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, inbox.Storage(errors.New("the log's last line moved while it was read"), "build the search index")
		}
		cov.LineCRC = sum
	}
	tids, err := s.threadIDs()
	if err != nil {
		return nil, err
	}
	type filed struct {
		doc   searchindex.Doc
		terms []string
	}
	const workers = 4
	work := make(chan string)
	out := make(chan []filed, workers)
	errc := make(chan error, workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The workers stop when the rebuild does (cancel), wherever they are.
	for range workers {
		go func() {
			for {
				var tid string
				select {
				case tid = <-work:
				case <-ctx.Done():
					return
				}
				h, err := s.readHeader(tid)
				if errors.Is(err, inbox.ErrNotFound) || errors.Is(err, inbox.ErrFormat) {
					select {
					case out <- nil:
					case <-ctx.Done():
						return
					}
					continue
				}
				var msgs []*inbox.Message
				if err == nil {
					msgs, err = s.readMessages(s.threadDir(tid), tid, h.MessageCount)
				}
				if err != nil {
					errc <- err
					return
				}
				fs := make([]filed, 0, len(msgs))
				for _, m := range msgs {
					if m.EventID > lastID {
						continue // a catch-up files it
					}
					fs = append(fs, filed{searchindex.Doc{EventID: m.EventID, Created: searchindex.CreatedMilli(m), ThreadID: tid, Seq: m.Seq},
						searchindex.MessageTerms(m, h.Subject)})
				}
				select {
				case out <- fs:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	b := searchindex.NewBuilder()
	pending, next := 0, 0
	for next < len(tids) || pending > 0 {
		var send chan string
		var tid string
		if next < len(tids) {
			send, tid = work, tids[next]
			if inbox.ValidateID("thread", tid) != nil {
				next++
				continue
			}
		}
		select {
		case send <- tid:
			next++
			pending++
		case fs := <-out:
			pending--
			for _, f := range fs {
				b.Add(f.doc, f.terms)
			}
		case err := <-errc:
			return nil, err
		case <-ctx.Done():
			return nil, fmt.Errorf("build the search index: %w", ctx.Err())
		}
	}
	data, err := b.Encode(searchindex.Meta{Covered: cov})
	if err != nil {
		return nil, inbox.Storage(err, "build the search index")
	}
	base, err := searchindex.Decode(data)
	if err != nil {
		return nil, inbox.Storage(err, "build the search index")
	}
	return &searchIndex{base: base}, s.saveSearchBase(data)
}

// saveSearchBase writes a new base, then removes the delta, which adds
// to the old one (readers ignore it from the moment the base is renamed).
func (s *Store) saveSearchBase(data []byte) error {
	if err := s.saveSearchFile(searchBaseFile, data); err != nil {
		return err
	}
	if err := os.Remove(s.searchFile(searchDeltaFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return inbox.Storage(err, "remove the old search index delta")
	}
	return nil
}

// saveSearchFile writes one of the index's files: staged in tmp/ and
// renamed into place, unsynced (it is derived: see above).
func (s *Store) saveSearchFile(name string, data []byte) error {
	if err := refuseLink(filepath.Join(s.dir, indexDirName)); err != nil {
		return err
	}
	st, err := s.stage(s.searchFile(name), data)
	if err != nil {
		return err
	}
	if err := os.Rename(st.tmp, st.target); err != nil {
		os.Remove(st.tmp)
		return inbox.Storage(err, "write %s", st.target)
	}
	return nil
}
