package spool

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/index"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// Files inside a thread directory.
const (
	headerLog = "thread.log" // the header: one checksummed JSON line per change
	leaseFile = "lease.json" // the lease: one checksummed JSON line, rewritten in place
)

// lockStripes is the number of thread lock files. Threads share them by
// hash, so creating a thread allocates no lock file; two threads in one
// stripe merely take turns.
const lockStripes = 256

// maxHeaderLog and maxCursorLog are the sizes past which a thread's header
// log or a read-cursor log is compacted to its last line.
const (
	maxHeaderLog = 1 << 20
	maxCursorLog = 64 << 10
)

// A thread mutation runs under the thread's lock and proceeds so that every
// crash leaves a state the next writer can settle:
//
//  1. the event log is locked, which fixes the event's id;
//  2. the idempotency record and the message (naming that event id) are
//     written to temp files and their writeback started;
//  3. the temp files are fsynced and renamed into the thread directory,
//     index markers for the new status and assignee are linked, and
//     lease.json is rewritten;
//  4. the new header is appended to thread.log and fdatasynced — the commit
//     point;
//  5. the event line is appended and fdatasynced, and the log unlocked;
//  6. the touched directories are fsynced and stale markers removed.
//
// A crash before 4 leaves records the header does not count (a message
// past message_count, a lease file whose rev is not lease_rev): the next
// writer removes or restores them. A crash between 4 and 5 leaves a header
// whose event is not in the log: the next writer appends it. See
// loadForWrite.
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
	// newKey is the idempotency key of a thread-creating send.
	newKey string
	// taskName registers a new thread as a queued task of that name.
	taskName string
}

func corrupt(err error, format string, args ...any) error {
	return inbox.Corrupt(err, format+" (run inbox fsck)", args...)
}

// errDamaged marks a message file that exists but does not parse: damage,
// not a crash (message files are published whole).
var errDamaged = errors.New("damaged message file")

func isDamaged(err error) bool { return errors.Is(err, errDamaged) }

// standIn is what readers get for a damaged message: a marker, not an
// error, so that the intact messages beside it stay readable.
func standIn(tid string, seq int) *inbox.Message {
	return &inbox.Message{ThreadID: tid, Seq: seq, Kind: inbox.KindEvent, PayloadJSON: json.RawMessage("{}"), Damaged: true,
		Summary: fmt.Sprintf("message #%d is damaged (its file is not valid JSON); inbox fsck can set it aside", seq)}
}

// msgFile is a message file on disk: the message, and in a thread's first
// message the thread's initial header, which stands as the header until
// the first change creates thread.log. A new thread thus costs two inodes
// (its directory and its first message), not three.
//
// The header comes first in the file, before the message and its body,
// so that reading it takes the file's first bytes, not the whole file
// (initialHeader). Files written before this order have it last; readers
// find it there too.
type msgFile struct {
	InitialHeader *header `json:"thread_header,omitempty"`
	// IdempotencyKey and IdempotencyCommand record the key of the
	// thread-creating send that wrote this first message (see idem.go).
	IdempotencyKey     string `json:"idempotency_key,omitempty"`
	IdempotencyCommand string `json:"idempotency_command,omitempty"`
	inbox.Message
}

// readHeader loads a thread's header: the last valid line of thread.log,
// or, before the thread's first change, the header in its first message.
func (s *Store) readHeader(tid string) (*header, error) {
	return s.readHeaderAt(s.threadDir(tid), tid)
}

// readHeaderAt reads the header of the thread whose directory is dir (a
// live or an archived thread).
func (s *Store) readHeaderAt(dir, tid string) (*header, error) {
	body, err := readLastLine(filepath.Join(dir, headerLog))
	if err != nil {
		return nil, inbox.Storage(err, "read thread %s", tid)
	}
	if body == nil {
		h, err := initialHeader(dir, tid)
		if isDamaged(err) {
			// The thread's state is in the log too: contain the damage.
			if lh, lerr := s.headerFromLog(tid); lerr == nil && lh != nil {
				return lh, nil
			}
		}
		return h, err
	}
	var h header
	if err := h.decodeJSON(body); err != nil {
		return nil, corrupt(err, "thread %s: header is not valid JSON", tid)
	}
	return &h, nil
}

// headerFromLog rebuilds a thread's header from the newest event that
// carries its state: for a thread whose only header, in its first
// message, was damaged. It reads the whole log; damage is rare.
func (s *Store) headerFromLog(tid string) (*header, error) {
	return s.newestState(Pos{}, tid, nil)
}

// newestState scans the log from pos for events of thread tid that carry
// its state, and returns the header of the newest one past newest (newest
// itself when there is none; nil means none yet).
func (s *Store) newestState(pos Pos, tid string, newest *header) (*header, error) {
	err := s.log.scan(pos, func(ev *logEvent, end Pos) bool {
		if ev.ThreadID == tid && ev.State != nil && (newest == nil || ev.EventID > newest.LastEventID) {
			st := ev.State
			last := ev.Event
			st.LastEventID, st.LogPos, st.LastEvent = ev.EventID, end, &last
			newest = st
		}
		return true
	})
	return newest, err
}

// headBufs hold the first bytes of first messages while their headers
// are read (fetch and list read many; the header's strings are copies).
var headBufs = sync.Pool{New: func() any { return new([4 << 10]byte) }}

// maxHeaderBytes bounds the header initialHeader reads: far above any
// real one (a subject, ids, a recipient list), so that a damaged file
// cannot make a reader hold much.
const maxHeaderBytes = 16 << 20

// initialHeader reads the initial header of the thread whose directory
// is dir from its first message. It reads the file only as far as the
// header: in files written since the header comes first, one read of its
// first bytes, never the body; in older files the members before it are
// skipped as they stream past, never held.
func initialHeader(dir, tid string) (*header, error) {
	f, err := openRead(filepath.Join(dir, msgName(1)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, inbox.NotFound("thread %s not found", tid) // absent, or created but never committed
	}
	if err != nil {
		return nil, inbox.Storage(err, "read thread %s", tid)
	}
	defer f.Close()
	bp := headBufs.Get().(*[4 << 10]byte)
	defer headBufs.Put(bp)
	buf := bp[:]
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, inbox.Storage(err, "read thread %s", tid)
	}
	buf = buf[:n]
	if rest, ok := bytes.CutPrefix(buf, []byte(`{"thread_header":`)); ok {
		var h header
		if _, err := jsonrec.DecodePrefix(rest, func(d *jsonrec.Decoder) { jsonReadHeader(d, &h) }); err == nil {
			return &h, nil
		}
		// A header longer than what was read, or damaged: read on.
	}
	raw, err := jsonrec.ReadMember(bufio.NewReaderSize(io.MultiReader(bytes.NewReader(buf), f), 16<<10), "thread_header", maxHeaderBytes)
	var pe *fs.PathError
	switch {
	case errors.Is(err, jsonrec.ErrNoMember), err == nil && string(raw) == "null":
		return nil, inbox.NotFound("thread %s not found", tid)
	case errors.As(err, &pe):
		return nil, inbox.Storage(err, "read thread %s", tid)
	case err != nil:
		return nil, corrupt(errors.Join(errDamaged, err), "thread %s: first message is not valid JSON", tid)
	}
	var h header
	if err := h.decodeJSON(raw); err != nil {
		return nil, corrupt(errors.Join(errDamaged, err), "thread %s: first message is not valid JSON", tid)
	}
	return &h, nil
}

// readLeaseFile reads lease.json; a missing or torn file gives nil (the
// header holds the committed copy).
func (s *Store) readLeaseFile(tid string) (*leaseRecord, error) {
	data, err := readFile(filepath.Join(s.threadDir(tid), leaseFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, inbox.Storage(err, "read lease of %s", tid)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	body, ok := checkLine(line)
	if !ok {
		return &leaseRecord{Rev: -1}, nil // torn: never equal to a committed rev
	}
	var l leaseRecord
	if err := l.decodeJSON(body); err != nil {
		return &leaseRecord{Rev: -1}, nil
	}
	return &l, nil
}

// writeLeaseFile rewrites lease.json in place, under the thread lock. It is
// not fsynced on its own: the header line that commits the change carries
// the lease, and a lease file that disagrees with the header after a crash
// is rewritten from it (loadForWrite).
func (s *Store) writeLeaseFile(dir string, l *leaseRecord) (created bool, err error) {
	p := filepath.Join(dir, leaseFile)
	f, err := openFile(p, os.O_RDWR, s.fileMode)
	if errors.Is(err, fs.ErrNotExist) {
		created = true
		f, err = openFile(p, os.O_CREATE|os.O_RDWR, s.fileMode)
	}
	if err != nil {
		return false, inbox.Storage(err, "write lease")
	}
	defer f.Close()
	line := encodeLine(l.appendJSON(nil))
	if _, err := f.WriteAt(line, 0); err != nil {
		return false, inbox.Storage(err, "write lease")
	}
	if err := f.Truncate(int64(len(line))); err != nil {
		return false, inbox.Storage(err, "write lease")
	}
	return created, nil
}

func (s *Store) readMessage(tid string, seq int) (*inbox.Message, error) {
	return s.readMessageAt(s.threadDir(tid), tid, seq)
}

func (s *Store) readMessageAt(dir, tid string, seq int) (*inbox.Message, error) {
	data, err := readFile(filepath.Join(dir, msgName(seq)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, inbox.NotFound("thread %s: message #%d not found", tid, seq)
	}
	if err != nil {
		return nil, inbox.Storage(err, "read message %d of %s", seq, tid)
	}
	// data is the message's alone: its strings share it, so a large body
	// is held once, as read.
	var m inbox.Message
	if err := jsonrec.DecodeOwned(data, m.ReadJSON); err != nil {
		return nil, corrupt(errors.Join(errDamaged, err), "thread %s: message #%d is not valid JSON", tid, seq)
	}
	return &m, nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// names lists the entries of directory dir, sorted; what names the
// directory in an error.
func names(dir, what string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, inbox.Storage(err, "list %s", what)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, inbox.Storage(err, "list %s", what)
	}
	slices.Sort(names)
	return names, nil
}

// threadLock returns the lock guarding thread tid.
func (s *Store) threadLock(tid string) *flock.Flock {
	h := fnv.New32a()
	h.Write([]byte(tid))
	name := fmt.Sprintf("thread-%02x.lock", h.Sum32()%lockStripes)
	return flock.New(s.lockFile(name), flock.SetPermissions(s.fileMode))
}

// lockThread takes the thread's lock; a missing thread is inbox.ErrNotFound.
func (s *Store) lockThread(tid string) (*flock.Flock, error) {
	if s.linkErr != nil {
		return nil, s.linkErr
	}
	dir := s.threadDir(tid)
	if err := refuseLink(dir); err != nil {
		return nil, err
	}
	if !exists(filepath.Join(dir, headerLog)) && !exists(filepath.Join(dir, msgName(1))) {
		if exists(s.archivedDir(tid)) {
			return nil, inbox.InvalidState("thread %s is archived: it can be shown but not changed", tid)
		}
		return nil, inbox.NotFound("thread %s not found", tid)
	}
	lk := s.threadLock(tid)
	if err := s.lockWithin(lk, "thread "+tid); err != nil {
		return nil, err
	}
	return lk, nil
}

// mutate runs fn on thread tid under its lock and commits what fn staged
// (nothing, when fn found an idempotent replay).
func (s *Store) mutate(tid string, fn func(tx *tx) error) error {
	lk, err := s.lockThread(tid)
	if errors.Is(err, inbox.ErrInvalidState) && exists(s.archivedDir(tid)) {
		return s.archivedReplay(tid, fn, err)
	}
	if err != nil {
		return err
	}
	defer lk.Unlock()
	h, err := s.loadForWrite(tid)
	if err != nil {
		return err
	}
	t := &tx{s: s, tid: tid, dir: s.threadDir(tid), now: s.now(), old: h, h: h.clone()}
	if err := fn(t); err != nil || t.skip {
		return err
	}
	t.sealIdem()
	return t.commit()
}

// settled returns thread tid's header after settling, under the thread's
// lock, whatever a crashed writer left (see loadForWrite).
func (s *Store) settled(tid string) (*header, error) {
	lk, err := s.lockThread(tid)
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	return s.loadForWrite(tid)
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

// loadForWrite reads the header under the thread lock and settles what a
// crashed writer left behind.
func (s *Store) loadForWrite(tid string) (*header, error) {
	h, err := s.readHeader(tid)
	if err != nil {
		return nil, err
	}
	logged, err := s.hasOwnEvent(h)
	if err != nil {
		return nil, err
	}
	orphans := exists(filepath.Join(s.threadDir(tid), msgName(h.MessageCount+1)))
	if !orphans {
		l, err := s.readLeaseFile(tid)
		if err != nil {
			return nil, err
		}
		orphans = (l == nil) != (h.LeaseRev == 0) || l != nil && l.Rev != h.LeaseRev
	}
	if logged && !orphans {
		return h, nil
	}
	return s.settle(tid, h, logged)
}

// hasOwnEvent reports whether the header's last event is in the log where
// the header says it ends (true too when that segment was archived).
func (s *Store) hasOwnEvent(h *header) (bool, error) {
	if h.LastEventID == 0 {
		return false, nil
	}
	if !exists(s.log.segPath(h.LogPos.Segment)) {
		return true, nil
	}
	body, ok, garbled, err := s.log.eventAt(h.LogPos)
	if err != nil {
		return false, err
	}
	if garbled && s.log.continuesAfter(h.LogPos) {
		// Damage inside the log, not a crash (appends are whole and at
		// the end): the event is there. Appending it again would give it
		// a second id; fsck --repair restores it under its own.
		return true, nil
	}
	if !ok {
		return false, nil
	}
	id, _ := lineID(body)
	return id == h.LastEventID && bytes.Contains(body, []byte(`"thread_id":"`+h.ThreadID+`"`)), nil
}

// settle repairs a thread after a crash: a header whose event never reached
// the log gets it appended; events past the header (possible only after a
// power loss) roll the header forward; records that no header counts are
// removed (messages) or restored from the header (the lease file); the
// index is reconciled.
//
// A re-appended event follows the commit protocol: its new header line is
// appended before the event is written. Were it the other way round, a
// crash between the two would leave an event no header names, and the
// next settle would append it a second time.
func (s *Store) settle(tid string, h *header, logged bool) (*header, error) {
	newest := h
	var ap *appender
	var line []byte
	if logged {
		var err error
		if newest, err = s.newestState(h.LogPos, tid, h); err != nil {
			return nil, err
		}
	} else {
		var err error
		if ap, err = s.log.reserve(); err != nil {
			return nil, err
		}
		defer ap.release()
		ev := inbox.Event{EventType: inbox.EventThreadUpdated, ThreadID: tid}
		if h.LastEvent != nil {
			ev = *h.LastEvent
		}
		n := h.clone()
		ev.EventID = ap.next
		line = encodeEvent(&logEvent{Event: ev, State: snapshot(n)})
		n.LastEventID, n.LogPos, n.LastEvent = ev.EventID, Pos{Segment: ap.first, Offset: ap.end + int64(len(line))}, &ev
		newest = n
	}
	dir := s.threadDir(tid)
	var ss syncSet
	ss.add(dir)
	for seq := newest.MessageCount + 1; ; seq++ {
		p := filepath.Join(dir, msgName(seq))
		if !exists(p) {
			break
		}
		if err := os.Remove(p); err != nil {
			return nil, inbox.Storage(err, "remove uncommitted message %s", p)
		}
	}
	if newest.Lease != nil {
		if _, err := s.writeLeaseFile(dir, &leaseRecord{Lease: *newest.Lease, Rev: newest.LeaseRev}); err != nil {
			return nil, err
		}
	} else if err := os.Remove(filepath.Join(dir, leaseFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, inbox.Storage(err, "remove uncommitted lease of %s", tid)
	}
	if newest != h {
		dirs, err := s.idx.Add(entryOf(newest), filepath.Join(dir, msgName(1)))
		if err != nil {
			return nil, inbox.Storage(err, "index thread %s", tid)
		}
		ss.add(dirs...)
	}
	if err := ss.flush(); err != nil {
		return nil, err
	}
	if newest != h {
		if _, err := s.appendHeader(dir, newest, nil, true); err != nil {
			return nil, err
		}
	}
	if ap != nil {
		if err := ap.writeDurable(line, 1); err != nil {
			return nil, err
		}
		ap.release()
	}
	if newest != h && indexChanged(h, newest) {
		if err := s.idx.Remove(entryOf(h), entryOf(newest)); err != nil {
			return nil, inbox.Storage(err, "index thread %s", tid)
		}
	}
	return newest, nil
}

// appendHeader commits h: it appends it to the thread's header log (and
// fdatasyncs, with sync: repairs do; a change's commit leaves that to its
// log line). The caller holds the thread lock. restore takes the line
// back (to old, the header before it), for a change that fails after its
// commit point and before it is acknowledged.
func (s *Store) appendHeader(dir string, h, old *header, sync bool) (restore func(), err error) {
	p := filepath.Join(dir, headerLog)
	end, compacted, err := s.appendLine(p, encodeLine(h.appendJSON(nil)), maxHeaderLog, sync)
	if err != nil {
		return nil, err
	}
	return func() {
		if !compacted {
			truncateSync(p, end) // the line went on the end
		} else if old != nil {
			// The log was compacted to the new line: write the old one.
			publishFile(p, s.tmpDir(), s.fileMode, encodeLine(old.appendJSON(nil)))
		}
	}, nil
}

// truncateSync cuts the file at p to size and makes that durable.
func truncateSync(p string, size int64) {
	f, err := openFile(p, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if f.Truncate(size) == nil {
		fdatasync(f)
	}
}

// entryOf is the thread's index entry. Mail is indexed by status only:
// it is in no agent's tree, so no fetch ever reads it.
func entryOf(h *header) index.Entry {
	e := index.Entry{ThreadID: h.ThreadID, Status: h.Status, AssignedTo: h.AssignedTo, Priority: h.Priority}
	if h.AssignedTo == "" {
		e.Offered = h.Recipients
	}
	if h.Mail {
		e.AssignedTo, e.Offered = "", nil
	}
	return e
}

// offeredTo reports whether the thread is agent's to fetch: assigned to
// it, or assigned to no one and offered to it among several recipients.
func (h *header) offeredTo(agent string) bool {
	return h.AssignedTo == agent || h.AssignedTo == "" && slices.Contains(h.Recipients, agent)
}

func indexChanged(a, b *header) bool {
	return a.Status != b.Status || a.AssignedTo != b.AssignedTo || a.Priority != b.Priority ||
		!slices.Equal(a.Recipients, b.Recipients)
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
		mf.IdempotencyKey, mf.IdempotencyCommand = t.newKey, "send"
	}
	return mf
}

// commit writes what the transaction staged, in the order described on tx.
// For a new thread the first message, carrying the initial header, is the
// commit point instead of a header line.
func (t *tx) commit() error { return t.s.commitAll([]*tx{t}) }

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

// sealLine turns a JSON object into a checksummed line, as encodeLine
// does, in place: body's capacity, when it has room for the checksum,
// becomes the line's.
func sealLine(body []byte) []byte {
	sum := crc32.ChecksumIEEE(body)
	line := append(body[:len(body)-1], `,"crc":"`...)
	const hex = "0123456789abcdef"
	for i := 7; i >= 0; i-- {
		line = append(line, hex[(sum>>(4*uint(i)))&15])
	}
	return append(line, '"', '}', '\n')
}

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

// commitAll commits transactions on distinct threads together: one
// reservation of the event log, one append of all their event lines with
// one fdatasync, one round of directory fsyncs. Each transaction keeps its
// own commit point (its header line, or a new thread's first message), so
// a crash part-way leaves each one either committed or not.
//
// A failure (a full disk, a failed fsync) undoes what the call created,
// in reverse order, before it returns: a refused change leaves the store
// as it was, not with debris for fsck to find. Only what a crash leaves
// is for the next writer (settle) or fsck --repair.
func (s *Store) commitAll(txs []*tx) (err error) {
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
	ap, err := s.log.reserve()
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
			if err := s.registerTask(t.taskName, first.tmp); err != nil {
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
