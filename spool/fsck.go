package spool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/index"
)

// Fsck checks every invariant of SPEC §8 that the files can show: the
// event log's lines, checksums and ids; each thread's header against its
// messages, events, lease file and index markers; stray temp files and
// stale records. With repair it fixes what a crash can leave half-done,
// holding every lock of the store while it does.
func (s *Store) Fsck(ctx context.Context, repair bool) (*inbox.FsckReport, error) {
	if repair {
		// The locks themselves must not be taken through what was
		// planted in their place (fsck_planted.go).
		planted := s.setAsideFirst()
		locked, unlock, err := s.lockAllToWrite(ctx)
		if err != nil {
			return nil, err
		}
		defer unlock()
		r, err := locked.fsck(ctx, repair)
		if r != nil && len(planted) > 0 {
			r.Findings = append(planted, r.Findings...)
		}
		if (locked.linkErr == nil) != (s.linkErr == nil) {
			// A planted link was removed (or found): writes through
			// this Store go again (or stop).
			s.linkErr = locked.linkErr
		}
		return r, err
	}
	return s.fsck(ctx, repair)
}

// addFinding adds a finding to the report of a check and returns it, for
// its repair to complete.
type addFinding func(inbox.Finding) *inbox.Finding

// removable adds f, a finding about a file (f.Path) that repair removes.
func (add addFinding) removable(f inbox.Finding, repair bool) {
	r := add(f)
	if repair {
		r.Repaired = os.Remove(f.Path) == nil
	}
}

// fsck is Fsck; with repair, s is the view of a caller that holds every
// lock of the store (lockAllToWrite).
func (s *Store) fsck(ctx context.Context, repair bool) (*inbox.FsckReport, error) {
	r := &inbox.FsckReport{Findings: []inbox.Finding{}}
	add := addFinding(func(f inbox.Finding) *inbox.Finding {
		r.Findings = append(r.Findings, f)
		return &r.Findings[len(r.Findings)-1]
	})

	// 0. Symbolic links, which inbox never makes: first, so that a repair
	// writes nothing through one.
	s.fsckSymlinks(add, repair)
	if repair {
		for _, d := range []string{tmpDirName, threadsDir, eventsDir, locksDir, idemDir} {
			if err := os.Mkdir(filepath.Join(s.dir, d), s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, inbox.Storage(err, "create %s", d)
			}
		}
		s.linkErr = s.checkNoLinks()
	}

	// 1. The event log.
	if segs, _ := os.ReadDir(s.log.dir); !slices.ContainsFunc(segs, func(e os.DirEntry) bool {
		return strings.HasSuffix(e.Name(), segSuffix)
	}) {
		f := add(inbox.Finding{Check: "missing_event_log", Path: s.log.dir, Detail: "the event log has no segment"})
		if !repair {
			return r, nil // nothing else can be checked against the log
		}
		if err := s.restartLog(); err != nil {
			return nil, err
		}
		f.Detail += "; started a new one after the highest event id the threads name"
		f.Repaired = true
	}
	events, err := s.fsckLog(ctx, r, add, repair)
	if err != nil {
		return nil, err
	}

	// 2. Temp files: with the store locked, nothing is being written.
	if repair {
		entries, _ := os.ReadDir(s.tmpDir())
		for _, e := range entries {
			p := filepath.Join(s.tmpDir(), e.Name())
			f := add(inbox.Finding{Check: "stray_temp_file", Path: p, Detail: "left by an interrupted write"})
			f.Repaired = os.RemoveAll(p) == nil
		}
	} else if entries, _ := os.ReadDir(s.tmpDir()); len(entries) > 0 {
		for _, e := range entries {
			add(inbox.Finding{Check: "stray_temp_file", Path: filepath.Join(s.tmpDir(), e.Name()),
				Detail: "left by an interrupted write, or a write in progress"})
		}
	}

	// 3. Threads.
	tids, err := s.threadIDs()
	if err != nil {
		return nil, err
	}
	headers := map[string]*header{}
	byEvent := map[int64]*inbox.Message{} // every message, by the id of its event
	for _, tid := range tids {
		h, err := s.fsckThread(ctx, tid, events, byEvent, add, repair)
		if err != nil {
			return nil, err
		}
		if h != nil {
			headers[tid] = h
			r.Threads++
			r.Messages += h.MessageCount
		}
	}
	// Damage inside the event log, now that the messages and headers that
	// name the events it hid are known.
	if repair && len(events.gaps) > 0 {
		if err := s.restoreGaps(events, r, headers, byEvent); err != nil {
			return nil, err
		}
	}

	// 4. The index against the headers: rebuilt from nothing when it is
	// not whole (readers refuse it until then).
	if err := s.idx.Check(); err != nil {
		f := add(inbox.Finding{Check: "missing_index", Path: filepath.Join(s.dir, indexDirName),
			Detail: strings.TrimPrefix(err.Error(), index.ErrMissing.Error()+": ") + "; fetch and list refuse to answer until it is rebuilt"})
		if repair {
			if _, err := s.rebuildIndex(); err != nil {
				return nil, err
			}
			f.Detail += "; rebuilt from the thread headers"
			f.Repaired = true
		}
	}
	if err := s.fsckIndex(headers, add, repair); err != nil {
		return nil, err
	}
	if err := s.fsckSearch(ctx, headers, byEvent, add, repair); err != nil {
		return nil, err
	}

	// 5. Idempotency links of thread-creating sends.
	s.fsckIdem(headers, add, repair)
	// 6. Mailbox entries and task names that no committed message backs;
	// acknowledgments owed; teams against the log.
	s.fsckLinks(ctx, add, repair)
	s.fsckAcks(headers, byEvent, add, repair)
	if err := s.fsckTeams(add, repair); err != nil {
		return nil, err
	}
	// 7. Blobs against the messages that name them.
	if err := s.fsckBlobs(events.blobs, add, repair); err != nil {
		return nil, err
	}
	r.Events = len(events.ids)
	return r, nil
}

// fsckIdem finds idempotency links of thread-creating sends that name
// no committed thread, live or archived.
func (s *Store) fsckIdem(headers map[string]*header, add addFinding, repair bool) {
	entries, _ := os.ReadDir(filepath.Join(s.dir, idemDir))
	for _, e := range entries {
		p := filepath.Join(s.dir, idemDir, e.Name())
		data, err := readFile(p)
		var m msgFile
		if err == nil && m.decodeJSON(data) == nil && m.ThreadID != "" &&
			(headers[m.ThreadID] != nil || exists(s.archivedDir(m.ThreadID))) {
			continue
		}
		add.removable(inbox.Finding{Check: "stale_idempotency_record", Path: p, Detail: "names no committed thread"}, repair)
	}
}

// eachMarker calls fn for every marker (a link named for a message, see
// parseMarker) in the agents' directories under root (mailbox/, acks/).
// Other names (.collected, …) are skipped.
func eachMarker(root string, fn func(agent, p, tid string, seq int)) {
	agents, _ := os.ReadDir(root)
	for _, a := range agents {
		dir := filepath.Join(root, a.Name())
		names, _ := os.ReadDir(dir)
		for _, n := range names {
			if _, _, tid, seq, ok := parseMarker(n.Name()); ok {
				fn(a.Name(), filepath.Join(dir, n.Name()), tid, seq)
			}
		}
	}
}

// fsckLinks finds mailbox entries and task registrations left by commits
// that never happened.
func (s *Store) fsckLinks(ctx context.Context, add addFinding, repair bool) {
	eachMarker(filepath.Join(s.dir, mailboxDir), func(_, p, tid string, seq int) {
		h, err := s.readHeader(tid)
		if err == nil && seq <= h.MessageCount && sameFile(p, filepath.Join(s.threadDir(tid), msgName(seq))) {
			return
		}
		if err != nil && exists(s.archivedDir(tid)) {
			return
		}
		add.removable(inbox.Finding{Check: "stale_mailbox_entry", Path: p, Detail: "names a message that was never committed"}, repair)
	})
	tasks, _ := os.ReadDir(filepath.Join(s.dir, tasksDir))
	for _, e := range tasks {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		// The link itself, not TaskByName, which falls back to the
		// name's history when the link is stale.
		if _, err := s.taskAt(name, s.taskPath(name)); !errors.Is(err, inbox.ErrNotFound) {
			continue
		}
		add.removable(inbox.Finding{Check: "stale_task", Path: filepath.Join(s.dir, tasksDir, e.Name()),
			Detail: "a task name whose push never committed"}, repair)
	}
}

func (s *Store) fsckIndex(headers map[string]*header, add addFinding, repair bool) error {
	for tid, h := range headers {
		e := entryOf(h)
		for _, p := range s.idx.Paths(e) {
			if exists(p) {
				continue
			}
			f := add(inbox.Finding{Check: "missing_index", ThreadID: tid, Path: p, Detail: "the index does not list the thread under its status and assignee"})
			if repair {
				_, err := s.idx.Add(e, filepath.Join(s.threadDir(tid), msgName(1)))
				f.Repaired = err == nil
			}
		}
	}
	return s.idx.Walk(func(e index.Entry, path string) {
		h := headers[e.ThreadID]
		if h != nil && slices.Contains(s.idx.Paths(entryOf(h)), path) {
			return
		}
		agrees := h != nil && h.Status == e.Status && h.Priority == e.Priority && (e.AssignedTo == "" || entryOf(h).AssignedTo == e.AssignedTo)
		detail := "the thread does not exist"
		switch {
		case agrees:
			detail = "it lies outside the directory its thread id and status name"
		case h != nil:
			detail = fmt.Sprintf("the thread is %s, assigned to %s", h.Status, h.AssignedTo)
		}
		f := add(inbox.Finding{Check: "stale_index", ThreadID: e.ThreadID, Path: path, Detail: "a marker for " + e.Status + ", but " + detail})
		if repair {
			f.Repaired = s.idx.RemoveMarker(e, path) == nil
		}
	})
}

// fsckBlobs checks blobs/ against the blobs the messages name (live and
// archived): a named blob must be there, whole (its size and SHA-256); a
// blob nothing names was left by a change that never committed (a crash
// between linking it and the commit point) and is removed on repair.
// With repair every lock is held, so no change is between the two.
func (s *Store) fsckBlobs(named map[string]blobMeta, add addFinding, repair bool) error {
	arch := filepath.Join(s.dir, archiveDir, threadsDir)
	if tids, err := os.ReadDir(arch); err == nil {
		for _, e := range tids {
			dir := filepath.Join(arch, e.Name())
			h, err := s.readHeaderAt(dir, e.Name())
			if err != nil {
				continue
			}
			for seq := 1; seq <= h.MessageCount; seq++ {
				if m, err := s.readMessageAt(dir, e.Name(), seq); err == nil {
					for _, bm := range blobRefs(m) {
						named[bm.Blob] = bm
					}
				}
			}
		}
	}
	dir := filepath.Join(s.dir, blobsDir)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return inbox.Storage(err, "list blobs")
	}
	present := map[string]bool{}
	for _, e := range entries {
		rel := blobsDir + "/" + e.Name()
		p := filepath.Join(dir, e.Name())
		bm, ok := named[rel]
		if !ok {
			add.removable(inbox.Finding{Check: "orphan_blob", Path: p, Detail: "a blob no message names (left by a change that never committed)"}, repair)
			continue
		}
		present[rel] = true
		if why := checkBlob(p, bm); why != "" {
			add(inbox.Finding{Check: "damaged_blob", Path: p, Detail: why})
		}
	}
	for rel, bm := range named {
		if !present[rel] {
			add(inbox.Finding{Check: "missing_blob", Path: filepath.Join(s.dir, filepath.FromSlash(rel)),
				Detail: fmt.Sprintf("a message names %s, which is not in the store", bm)})
		}
	}
	return nil
}

// checkBlob says what is wrong with the blob file at p, if anything.
func checkBlob(p string, bm blobMeta) string {
	f, err := openRead(p)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	d := sha256.New()
	n, err := io.Copy(d, f)
	switch {
	case err != nil:
		return err.Error()
	case n != bm.Bytes:
		return fmt.Sprintf("%d bytes, but its message says %d", n, bm.Bytes)
	case hex.EncodeToString(d.Sum(nil)) != bm.SHA256 || filepath.Base(p) != bm.SHA256:
		return fmt.Sprintf("its content's SHA-256 is %s, not the %s its name and message say", hex.EncodeToString(d.Sum(nil)), bm.SHA256)
	}
	return ""
}
