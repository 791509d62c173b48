package spool

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/index"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// A tx is one change to one thread: staged by an operation under the
// thread's lock (mutate; a new thread has no lock yet, being invisible
// until it commits), then written by commitAll, alone or with the other
// threads of a batch. The event log is the commit point of durability
// (docs/ARCHITECTURE.md, "One flush per acknowledged write"): a change
// waits for one flush, of its log line, and shares it with concurrent
// writers. commitAll writes in this order:
//
//  1. the event log is locked, which fixes the change's event id and
//     where its line starts (blobs, the one content the line does not
//     carry, were fsynced when they were staged);
//  2. the thread's idempotency record and the message file (naming that
//     event id) are written to temp files in tmp/, not fsynced; the
//     message's blobs are linked into blobs/; index markers for the new
//     status and assignee, the idempotency key's link, the mailbox and
//     acknowledgment links and a task's name are linked to the message's
//     temp file; blobs/ is fsynced when a blob was linked;
//  3. the temp files are renamed into the thread directory (a new
//     thread's first message last: that rename is its commit point for a
//     killed process), and lease.json is rewritten;
//  4. the new header is appended to thread.log, without an fdatasync:
//     the commit point for a killed process;
//  5. the event lines, which carry the header (state) and the message,
//     are written with one write, and the log is unlocked;
//  6. the log is flushed with group commit (eventLog.flush): one
//     fdatasync, or none when another writer's already covered the
//     lines — the commit point for a power cut; only then is the change
//     acknowledged, lease.json's time set and stale markers removed.
//
// A failure before 6 (a full disk, say) undoes what the call made. A
// kill before 4 leaves records the header does not count (a message past
// message_count, a lease file whose rev is not lease_rev): the next
// writer removes or restores them. A kill between 4 and 5 leaves a header
// whose event is not in the log: the next writer appends it (see
// loadForWrite and settle). A power cut before 6 completes loses at most
// changes never acknowledged: whoever opens the store next replays the
// log past the durable watermark and rolls back what it does not hold
// (checkpoint.go).
type tx struct {
	s   *Store
	tid string
	dir string
	now time.Time
	old *header // committed header before the operation; nil for a new thread
	h   *header // the header being built
	msg *draft
	// lease, when set, is written to lease.json with the next rev.
	lease *inbox.Lease
	idem  *idemRecord
	ev    inbox.Event
	// skip is set when an idempotency key replayed an earlier call:
	// there is nothing to commit.
	skip bool
	// newKey is the idempotency key of a thread-creating send, newArgs
	// what the send was given (inbox.NewThreadArgs).
	newKey, newArgs string
	// taskName registers a new thread as a queued task of that name.
	taskName string
	// readBy is the agent the change reads the thread for (a claim, or a
	// done, fail or cancel: see readOf): once committed, its cursor moves
	// to the newest message and its mailbox entries of the thread go.
	readBy string
}

// mutate runs fn on thread tid under its lock and commits what fn staged
// (nothing, when fn found an idempotent replay).
func (s *Store) mutate(ctx context.Context, tid string, fn func(tx *tx) error) error {
	lk, err := s.lockThread(ctx, tid)
	if errors.Is(err, inbox.ErrInvalidState) && exists(s.archivedDir(tid)) {
		return s.archivedReplay(tid, fn, err)
	}
	if err != nil {
		return err
	}
	defer lk.Unlock()
	h, err := s.loadForWrite(ctx, tid)
	if err != nil {
		return err
	}
	t := &tx{s: s, tid: tid, dir: s.threadDir(tid), now: s.now(), old: h, h: h.clone()}
	if err := fn(t); err != nil || t.skip {
		return err
	}
	t.sealIdem()
	return t.commit(ctx)
}

// archivedReplay runs fn against an archived thread, read-only: a retry
// with an idempotency key the thread already saw replays its original
// result; anything else is refused with refusal (archived threads do not
// change).
func (s *Store) archivedReplay(tid string, fn func(tx *tx) error, refusal error) error {
	dir := s.archivedDir(tid)
	h, err := s.readHeaderAt(dir, tid)
	if err != nil {
		return refusal
	}
	t := &tx{s: s, tid: tid, dir: dir, now: s.now(), old: h, h: h.clone()}
	if fn(t) == nil && t.skip {
		return nil
	}
	return refusal
}

// snapshot is the copy of a header stored in its event: without the fields
// that only the event's own position determines.
func snapshot(h *header) *header {
	c := h.clone()
	c.LastEventID, c.LogPos, c.LastEvent = 0, Pos{}, nil
	return c
}

// setLease stages a lease write; the header's copy is updated at once.
func (t *tx) setLease(l inbox.Lease) {
	l.ThreadID = t.tid
	t.lease = &l
	c := l
	t.h.Lease = &c
}

// addMessage stages m as the thread's next message.
func (t *tx) addMessage(m *draft) {
	t.h.MessageCount++
	m.Seq = t.h.MessageCount
	m.ThreadID = t.tid
	t.h.LatestMessageID = m.MessageID
	if t.h.LastFrom == nil {
		t.h.LastFrom = map[string]int{}
	}
	t.h.LastFrom[m.FromAgent] = m.Seq
	t.msg = m
	t.ev.MessageID = m.MessageID
	t.ev.Kind = m.Kind
	t.ev.Type = m.Type
}

// staged is a file written to a temp name in tmp/, to be renamed to
// target when its change commits. It is not fsynced: its content is in
// the change's log line, from which replay rewrites it after a power cut
// (docs/ARCHITECTURE.md, format 2).
type stagedFile struct {
	tmp, target string
}

// stage writes data (the concatenation of its parts) to a temp file in
// tmp/ destined for path.
func (s *Store) stage(path string, data ...[]byte) (*stagedFile, error) {
	f, err := os.CreateTemp(s.tmpDir(), ".stage-")
	if err != nil {
		return nil, inbox.Storage(err, "write %s", path)
	}
	st := &stagedFile{tmp: f.Name(), target: path}
	for _, part := range data {
		if _, err = f.Write(part); err != nil {
			break
		}
	}
	if err == nil && s.fileMode != 0o600 { // CreateTemp made it 0600
		err = f.Chmod(s.fileMode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(st.tmp)
		return nil, inbox.Storage(err, "write %s", path)
	}
	return st, nil
}

// messageFile is the change's message as its file holds it (without the
// initial header a thread's first message file also carries).
func (t *tx) messageFile() *msgFile {
	mf := &msgFile{Message: t.msg.Message}
	if t.old == nil && t.newKey != "" {
		mf.IdempotencyKey, mf.IdempotencyCommand, mf.IdempotencyArgs = t.newKey, "send", t.newArgs
	}
	return mf
}

// commit writes what the transaction staged, in the order described on tx.
// For a new thread the first message, carrying the initial header, is the
// commit point instead of a header line.
func (t *tx) commit(ctx context.Context) error { return t.s.commitAll(ctx, []*tx{t}) }

// event builds the transaction's event line with the given id, the line
// starting at start, and records it in the header (which names its last
// event). A change that adds a message carries it as the line's last
// member, and msg is that member's value inside line: the message's file
// is written from the same bytes (messageFileData), so that a large body
// is encoded once, into a buffer made to its size, and held once.
func (t *tx) event(id int64, segment, start int64) (line, msg []byte) {
	ev := t.ev
	ev.EventID = id
	ev.RunID, ev.TaskID, ev.ThreadID = t.h.RunID, t.h.TaskID, t.tid
	ev.Source = t.s.source
	ev.CreatedAt = t.h.UpdatedAt
	ev.Status = t.h.Status
	ev.Summary = inbox.Shorten(ev.Summary, maxEventSumLen)
	if ev.PayloadJSON == nil {
		ev.PayloadJSON = json.RawMessage("{}")
	}
	le := &logEvent{Event: ev, State: snapshot(t.h), Idem: t.idem, Task: t.taskName}
	head := le.appendJSON(nil)
	if t.msg == nil {
		line = sealLine(head)
	} else {
		// The line as le.appendJSON would write it with the message, its
		// last member: the head without its closing brace, the message,
		// the brace.
		mf := t.messageFile()
		b := make([]byte, 0, len(head)+len(msgMember)+mf.sizeHint()+1+crcSuffixLen+1)
		b = append(append(b, head[:len(head)-1]...), msgMember...)
		at := len(b)
		b = mf.appendJSON(b)
		msg = b[at:len(b):len(b)]
		line = sealLine(append(b, '}'))
	}
	t.h.LastEventID = id
	t.h.LogPos = Pos{Segment: segment, Offset: start + int64(len(line))}
	t.h.LastEvent = &ev
	return line, msg
}

// msgMember introduces a line's message (see logEvent).
const msgMember = `,"message":`

// largeContent is the size of a body and payload past which encoding a
// message first measures it, so that its buffer is made once to its
// size (a buffer that grows copies what it holds at every step, and
// each copy it leaves adds to the process's peak memory).
const largeContent = 1 << 20

// sizeHint is how many bytes mf.appendJSON writes: exactly, for a
// message with large content; a guess that is usually enough otherwise.
func (mf *msgFile) sizeHint() int {
	n := len(mf.Body) + len(mf.PayloadJSON)
	if n < largeContent {
		return n + 1024
	}
	c := *mf
	c.Body, c.PayloadJSON = "", json.RawMessage("{}")
	payload := len(mf.PayloadJSON) // compacted when written: at most this
	if payload == 0 {
		payload = len("null")
	}
	return len(c.appendJSON(nil)) - len(`""`) - len(`{}`) + jsonrec.StringLen(mf.Body) + payload
}

// messageFileData is what the message file of the change holds, given
// msg, the message as its event line carries it: the same bytes, after
// the initial header for a new thread's first message (which comes
// first in the file, see msgFile).
func (t *tx) messageFileData(msg []byte) [][]byte {
	if t.old != nil {
		return [][]byte{msg}
	}
	head := append([]byte(`{"thread_header":`), t.h.appendJSON(nil)...)
	return [][]byte{append(head, ','), msg[1:]}
}

// commitAll commits transactions on distinct threads together, in the
// order described on tx: one reservation of the event log, one write of
// all their event lines and one flush of them (shared with concurrent
// writers by group commit); no directory is fsynced but blobs/, when a
// blob was linked. Each transaction keeps its own commit point for a
// killed process (its header line, or a new thread's first message), so
// a kill part-way leaves each one either committed or not.
//
// A failure before the flush (a full disk, a failed fsync) undoes what
// the call created, in reverse order, before it returns: a refused change
// leaves the store as it was, not with debris for fsck to find. Only what
// a crash leaves is for the next writer (settle), replay or fsck --repair.
func (s *Store) commitAll(ctx context.Context, txs []*tx) (err error) {
	if s.linkErr != nil {
		return s.linkErr
	}
	var blobsLinked bool
	var pending []*stagedFile
	var undo []func()
	defer func() {
		for _, st := range pending {
			os.Remove(st.tmp) // what was not renamed into place
		}
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	stage := func(path string, data ...[]byte) (*stagedFile, error) {
		st, err := s.stage(path, data...)
		if err == nil {
			pending = append(pending, st)
		}
		return st, err
	}
	// link makes a name that must go again if the change fails.
	link := func(src, dst string) error {
		if err := os.Link(src, dst); err != nil {
			return err
		}
		undo = append(undo, func() { os.Remove(dst) })
		return nil
	}
	for _, t := range txs {
		if t.old == nil {
			// prepareThread made the directory of a new thread.
			dir := t.dir
			undo = append(undo, func() { os.RemoveAll(dir) })
		}
	}
	ap, err := s.log.reserve(ctx)
	if err != nil {
		return err
	}
	defer ap.release()
	var lines []byte
	id, off := ap.next, ap.end
	for _, t := range txs {
		fresh := t.old == nil
		t.h.UpdatedAt = inbox.FormatTime(t.now)
		if t.idem != nil {
			if _, err := stage(filepath.Join(t.dir, threadIdemName(t.idem.hash)), t.idem.appendJSON(nil)); err != nil {
				return err
			}
		}
		if t.lease != nil {
			t.h.LeaseRev++
		}
		if t.msg != nil {
			t.msg.EventID = id
		}
		// The event, and with it the header's log position, come first: the
		// header names its event, and the message its event id.
		line, msg := t.event(id, ap.first, off)
		if len(line) > maxLogLine {
			// Past what validation allows (see maxLogLine): refused,
			// so that every line the log holds can be read back.
			return inbox.TooLarge("message", int64(len(line)), maxLogLine, "the longest event log line",
				"send less inline content in one message")
		}
		if len(txs) == 1 {
			lines = line
		} else {
			lines = append(lines, line...)
		}
		off += int64(len(line))
		id++
		var first, msgFileSt *stagedFile
		if t.msg != nil {
			st, err := stage(filepath.Join(t.dir, msgName(t.msg.Seq)), t.messageFileData(msg)...)
			if err != nil {
				return err
			}
			msgFileSt = st
			if fresh {
				first = st
			}
			for _, b := range t.msg.blobs {
				created, err := s.linkBlob(b)
				if err != nil {
					return err
				}
				if created {
					p := filepath.Join(s.dir, blobsDir, b.SHA256)
					undo = append(undo, func() { os.Remove(p) })
				}
				blobsLinked = true
			}
		}
		if fresh || indexChanged(t.old, t.h) {
			// Markers are links to the first message's inode; for a new
			// thread that is still the temp file, linked before it is
			// renamed into place (the commit point), so the index stays a
			// superset.
			src := filepath.Join(t.dir, msgName(1))
			if first != nil {
				src = first.tmp
			}
			cur, old := entryOf(t.h), index.Entry{}
			if !fresh {
				old = entryOf(t.old)
			}
			// (Undone also when Add fails part-way: it may have made one
			// of the thread's markers.)
			undo = append(undo, func() { s.idx.Remove(cur, old) })
			if _, err := s.idx.Add(cur, src); err != nil {
				return inbox.Storage(err, "index thread %s", t.tid)
			}
		}
		if first != nil && t.newKey != "" {
			// The key's record: a link to the first message, made before
			// the commit point like the index markers.
			p := s.idemPath(idemHash(t.newKey))
			os.Remove(p) // a stale link of an attempt that never committed
			if err := link(first.tmp, p); err != nil {
				return inbox.Storage(err, "record idempotency key")
			}
		}
		if msgFileSt != nil && t.msg.ToAgent != "" && t.taskName == "" {
			// (A task's prompt reaches it on stdin, not in its mailbox:
			// its first receive returns real mail.)
			// Each recipient's mailbox: a link to the message, made before
			// the commit point; readers check it against the thread.
			made, err := s.deliver(&t.msg.Message, msgFileSt.tmp, nil)
			undo = append(undo, func() {
				for _, p := range made {
					os.Remove(p)
				}
			})
			if err != nil {
				return err
			}
		}
		if first != nil && t.taskName != "" {
			// A queued task's name: the link fails if the name is taken.
			if err := s.registerTask(ctx, t.taskName, first.tmp); err != nil {
				return err
			}
			p := s.taskPath(t.taskName)
			undo = append(undo, func() { os.Remove(p) })
		}
	}
	// Blobs are the one content the log does not carry: their names must
	// be durable before the change is (their content was fsynced when
	// they were staged).
	if blobsLinked && !s.unsynced {
		if err := syncDir(filepath.Join(s.dir, blobsDir)); err != nil {
			return err
		}
	}
	// Rename the staged files in order, a new thread's first message after
	// its other files.
	for _, st := range pending {
		if err := os.Rename(st.tmp, st.target); err != nil {
			return inbox.Storage(err, "commit %s", st.target)
		}
		target := st.target
		undo = append(undo, func() { os.Remove(target) })
	}
	pending = nil
	for _, t := range txs {
		if t.lease != nil {
			rec := leaseRecord{Lease: *t.lease, Rev: t.h.LeaseRev}
			dir, old := t.dir, t.old
			undo = append(undo, func() {
				// Back to the committed lease (or none).
				if old == nil || old.Lease == nil {
					os.Remove(filepath.Join(dir, leaseFile))
					return
				}
				s.writeLeaseFile(dir, &leaseRecord{Lease: *old.Lease, Rev: old.LeaseRev})
			})
			if _, err := s.writeLeaseFile(t.dir, &rec); err != nil {
				return err
			}
		}
	}
	for _, t := range txs {
		if t.old != nil {
			// The commit point for a killed process (files reach the page
			// cache in this order); the log line below is the one for a
			// power cut.
			restore, err := s.appendHeader(t.dir, t.h, t.old, false)
			if err != nil {
				return err
			}
			undo = append(undo, restore)
		}
	}
	if err := ap.write(lines, len(txs)); err != nil {
		return err
	}
	// The lines are written: release the log for the next writer before
	// waiting for the disk, so that concurrent writers share flushes.
	seg := ap.detach()
	ap.release()
	ferr := s.log.flush(seg, ap.first, ap.end)
	seg.Close()
	if ferr != nil {
		// The lines may be on disk or not: the change is in the log for
		// every reader, and is not undone (another writer may have
		// appended after it). The caller reports a storage error; a
		// retry with an idempotency key finds the change if it stands.
		undo = nil
		return ferr
	}
	for _, t := range txs {
		if t.lease != nil && !t.lease.Released() {
			// A hint for fetch, set only once the lease is committed:
			// lease.json's modification time is when the lease ends
			// (see leaseSurelyLive). Any other time it may have (a
			// crash before this, a later rewrite) is earlier, which
			// only makes fetch look closer.
			if exp, err := inbox.ParseTime(t.lease.ExpiresAt); err == nil {
				os.Chtimes(filepath.Join(t.dir, leaseFile), time.Time{}, exp)
			}
		}
		if t.readBy != "" {
			t.s.readThrough(t.tid, t.h, t.readBy)
		}
		if t.old != nil && indexChanged(t.old, t.h) {
			// The old markers are stale now; readers skip stale markers
			// and fsck removes them, so a failure here is not the
			// change's failure.
			s.idx.Remove(entryOf(t.old), entryOf(t.h))
		}
	}
	s.maybeCheckpoint(ap.next - 1)
	return nil
}
