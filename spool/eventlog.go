package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox"
)

// The event log is a directory of segments, each named by the id of its
// first event (20 digits) with the suffix .jsonl. Each line is one event as
// a JSON object whose last member is "crc": the CRC-32 (IEEE) of the line's
// bytes with that member removed, as 8 hex digits.
//
// Appends take events.lock, read the last line to learn the last id, write
// one whole line in one write, fdatasync, and unlock; that makes ids unique
// and increasing across processes. A torn tail (a crash mid-append) is
// copied aside to a .bad file and truncated by the next writer; readers
// only ever consume complete lines whose CRC matches.

const segSuffix = ".jsonl"

// crcSuffixLen is len(`,"crc":"01234567"}`).
const crcSuffixLen = 18

type eventLog struct {
	dir      string
	lockPath string
	tmpDir   string
	segBytes int64
	fileMode os.FileMode
	// held is set while this Store holds events.lock for a whole upkeep
	// run (lockAll): appends then must not take it again — a second flock
	// from the same process would wait for itself.
	held        bool
	unsynced    bool          // Options.Unsynced
	lockTimeout time.Duration // Options.LockTimeout
}

func segmentName(first int64) string { return fmt.Sprintf("%020d%s", first, segSuffix) }

// maxEventSumLen is the length summaries are cut to in event lines.
const maxEventSumLen = 300

// encodeEvent renders ev as one log line, newline included.
func encodeEvent(ev *logEvent) []byte { return encodeLine(ev.appendJSON(nil)) }

// cursorOf is the read cursor a thread.read event records (see
// Store.MarkRead); false when its payload does not say one.
func cursorOf(ev *inbox.Event) (*inbox.Cursor, bool) {
	var p struct {
		ID  string `json:"last_read_message_id"`
		Seq int    `json:"last_read_seq"`
	}
	if json.Unmarshal(ev.PayloadJSON, &p) != nil {
		return nil, false
	}
	return &inbox.Cursor{ThreadID: ev.ThreadID, AgentID: ev.Agent, LastReadMessageID: p.ID,
		LastReadSeq: p.Seq, ReadAt: ev.CreatedAt}, true
}

// stateAt is the thread's header as ev, whose line ends at end, left it:
// the state ev carries (nil when none), naming ev as its last event.
func (ev *logEvent) stateAt(end Pos) *header {
	if ev.State == nil {
		return nil
	}
	h := ev.State.clone()
	h.LastEventID, h.LogPos = ev.EventID, end
	e := ev.Event
	h.LastEvent = &e
	return h
}

// checkLine verifies a line (without its newline) and returns the JSON
// object it carries without the crc member.
func checkLine(line []byte) ([]byte, bool) {
	if len(line) < crcSuffixLen+2 || line[0] != '{' {
		return nil, false
	}
	suf := line[len(line)-crcSuffixLen:]
	if !bytes.HasPrefix(suf, []byte(`,"crc":"`)) || suf[len(suf)-2] != '"' || suf[len(suf)-1] != '}' {
		return nil, false
	}
	want, err := strconv.ParseUint(string(suf[8:16]), 16, 32)
	if err != nil {
		return nil, false
	}
	body := make([]byte, 0, len(line)-crcSuffixLen+1)
	body = append(body, line[:len(line)-crcSuffixLen]...)
	body = append(body, '}')
	if crc32.ChecksumIEEE(body) != uint32(want) {
		return nil, false
	}
	return body, true
}

// lineID reads the event id at the start of a verified line body.
func lineID(body []byte) (int64, bool) {
	const pre = `{"event_id":`
	if !bytes.HasPrefix(body, []byte(pre)) {
		return 0, false
	}
	rest := body[len(pre):]
	end := bytes.IndexByte(rest, ',')
	if end < 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return id, err == nil
}

// segments returns the first ids of all segments, ascending.
func (l *eventLog) segments() ([]int64, error) {
	entries, err := names(l.dir, "event log")
	if err != nil {
		return nil, err
	}
	var segs []int64
	for _, n := range entries {
		if !strings.HasSuffix(n, segSuffix) || len(n) != 20+len(segSuffix) {
			continue
		}
		id, err := strconv.ParseInt(n[:20], 10, 64)
		if err == nil {
			segs = append(segs, id)
		}
	}
	slices.Sort(segs)
	if len(segs) == 0 {
		return nil, &inbox.Error{Code: "corrupt_store", Err: inbox.ErrFormat, Rule: "the event log has no segment (the store needs repair: run inbox fsck)"}
	}
	return segs, nil
}

func (l *eventLog) segPath(first int64) string { return filepath.Join(l.dir, segmentName(first)) }

// tail finds the last valid event in a segment of the given size. It
// returns its id (first-1 when the segment holds none) and the offset where
// valid data ends.
func tail(f *os.File, size, first int64) (lastID, end int64, err error) {
	body, end, err := lastLine(f, size, func(b []byte) bool { _, ok := lineID(b); return ok })
	if err != nil || body == nil {
		return first - 1, end, err
	}
	id, _ := lineID(body)
	return id, end, nil
}

// lastLine finds the last complete, checksummed line of a file of the given
// size that accept approves, and returns its body (nil if there is none) and
// the offset just past it. Bytes after that offset are a torn tail.
func lastLine(f *os.File, size int64, accept func([]byte) bool) (body []byte, end int64, err error) {
	window := int64(4 << 10) // a header or event line is well under this
	for {
		if window > size {
			window = size
		}
		buf := make([]byte, window)
		if _, err := f.ReadAt(buf, size-window); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, err
		}
		base := size - window
		// Walk complete lines backwards from the last newline.
		stop := bytes.LastIndexByte(buf, '\n')
		for stop >= 0 {
			start := bytes.LastIndexByte(buf[:stop], '\n') + 1
			if start == 0 && base > 0 {
				break // the line may begin before the window: widen it
			}
			if body, ok := checkLine(buf[start:stop]); ok && accept(body) {
				return body, base + int64(stop) + 1, nil
			}
			stop = start - 1
		}
		if base == 0 {
			return nil, 0, nil
		}
		window *= 4
	}
}

// appender holds the log lock from reserve to release: while it is held,
// next is the id the next event gets and end the offset its line starts at.
type appender struct {
	l     *eventLog
	lk    *flock.Flock
	f     *os.File
	first int64 // the segment being appended to
	end   int64
	next  int64
}

// reserve locks the log, repairs a torn tail, rotates the segment if it
// is full, and returns an appender positioned at the end.
func (l *eventLog) reserve() (*appender, error) {
	a := &appender{l: l}
	if !l.held {
		lk := flock.New(l.lockPath, flock.SetPermissions(l.fileMode))
		if err := lockWithin(lk, "event log", l.lockTimeout); err != nil {
			return nil, err
		}
		a.lk = lk
	}
	if err := a.open(); err != nil {
		a.release()
		return nil, err
	}
	return a, nil
}

// cutTail copies aside and cuts whatever follows the last valid line of
// the log (as reserve does before every append): for fsck --repair.
func (l *eventLog) cutTail() error {
	a, err := l.reserve()
	if err != nil {
		return err
	}
	a.release()
	return nil
}

func (a *appender) open() error {
	l := a.l
	segs, err := l.segments()
	if err != nil {
		return err
	}
	first := segs[len(segs)-1]
	f, err := openFile(l.segPath(first), os.O_RDWR|syscall.O_NOFOLLOW, l.fileMode)
	if errors.Is(err, syscall.ELOOP) {
		return refuseLink(l.segPath(first))
	}
	if err != nil {
		return inbox.Storage(err, "open event log")
	}
	a.f, a.first = f, first
	fi, err := f.Stat()
	if err != nil {
		return inbox.Storage(err, "stat event log")
	}
	lastID, end, err := tail(f, fi.Size(), first)
	if err != nil {
		return inbox.Storage(err, "read event log")
	}
	if end < fi.Size() {
		if err := l.repair(f, first, end, fi.Size()); err != nil {
			return err
		}
	}
	if end >= l.segBytes && lastID >= first {
		// Every line of the full segment is on disk before the next one
		// starts: a writer still to flush it finds a later segment in
		// the flush record, and takes that as covered.
		if !l.unsynced {
			if err := fdatasync(f); err != nil {
				return inbox.Storage(err, "fsync event log")
			}
		}
		first = lastID + 1
		nf, err := openFile(l.segPath(first), os.O_CREATE|os.O_EXCL|os.O_RDWR, l.fileMode)
		if err != nil {
			return inbox.Storage(err, "start event log segment")
		}
		f.Close()
		a.f, a.first, end = nf, first, 0
		if err := syncDir(l.dir); err != nil {
			return err
		}
		if err := l.setFlushed(first, 0); err != nil {
			return err
		}
	}
	a.end, a.next = end, lastID+1
	return nil
}

// write appends n encoded lines (for event ids a.next, a.next+1, …) with
// one write. They are not durable yet: the caller flushes (see flush),
// after releasing the log so that other writers may append meanwhile.
func (a *appender) write(lines []byte, n int) error {
	if _, err := a.f.WriteAt(lines, a.end); err != nil {
		a.f.Truncate(a.end) // leave no partial line behind
		return inbox.Storage(err, "append event")
	}
	a.end += int64(len(lines))
	a.next += int64(n)
	return nil
}

// writeDurable is write and an fdatasync under the log's lock, for the
// rare writers (repairs) that do not share flushes.
func (a *appender) writeDurable(lines []byte, n int) error {
	start := a.end
	if err := a.write(lines, n); err != nil {
		return err
	}
	if a.l.unsynced {
		return nil
	}
	if err := fdatasync(a.f); err != nil {
		// Not durable, so not written: the caller undoes the change the
		// lines stand for.
		a.f.Truncate(start)
		a.end, a.next = start, a.next-int64(n)
		return inbox.Storage(err, "fsync event log")
	}
	return a.l.setFlushed(a.first, a.end)
}

// detach hands the segment file to the caller, who closes it, so that it
// can be flushed after release.
func (a *appender) detach() *os.File {
	f := a.f
	a.f = nil
	return f
}

// release closes the segment and unlocks the log. It is safe to call twice.
func (a *appender) release() {
	if a.f != nil {
		a.f.Close()
		a.f = nil
	}
	if a.lk != nil {
		a.lk.Unlock()
		a.lk = nil
	}
}

// append writes ev as the next event, makes it durable (sharing the
// flush with concurrent writers) and returns its id and position.
func (l *eventLog) append(ev *logEvent) (int64, Pos, error) {
	return l.appendAfter(ev, nil)
}

// appendAfter is append that first runs before, with the event's id set,
// under the log's lock: for a change whose files name their event (a
// team's), written before the line that commits them.
func (l *eventLog) appendAfter(ev *logEvent, before func() error) (int64, Pos, error) {
	a, err := l.reserve()
	if err != nil {
		return 0, Pos{}, err
	}
	defer a.release()
	ev.EventID = a.next
	if before != nil {
		if err := before(); err != nil {
			return 0, Pos{}, err
		}
	}
	if err := a.write(encodeEvent(ev), 1); err != nil {
		return 0, Pos{}, err
	}
	f := a.detach()
	a.release()
	defer f.Close()
	return ev.EventID, Pos{Segment: a.first, Offset: a.end}, l.flush(f, a.first, a.end)
}

// Group commit. A writer flushes its lines after releasing the log: it
// takes the flock on locks/flush.lock and reads the record that file
// holds — the segment and offset up to which the log is known to be on
// disk. When a flush that started after its lines were written already
// covered them, it is done without a flush of its own; otherwise it notes
// how long the segment is, fdatasyncs (which covers every line written
// before), and records that length. While one writer flushes, the writers
// behind it queue on the lock, and the first of them usually finds its
// lines covered. The record carries the machine's boot id: after a reboot
// it covers nothing. Keeping the record in the lock file itself spares a
// flush two opens of another file.

// flushed is the record in locks/flush.lock.
type flushed struct {
	boot    string
	segment int64
	offset  int64
}

// flushLock is locks/flush.lock, open and exclusively flocked; Close
// unlocks it.
type flushLock struct{ f *os.File }

func (l *eventLog) lockFlush() (flushLock, error) {
	f, err := openFile(filepath.Join(filepath.Dir(l.lockPath), "flush.lock"), os.O_CREATE|os.O_RDWR, l.fileMode)
	if err != nil {
		return flushLock{}, inbox.Storage(err, "lock the event log's flush")
	}
	flock := func(how int) error {
		for {
			err := syscall.Flock(int(f.Fd()), how)
			if err != syscall.EINTR {
				return err
			}
		}
	}
	err = flock(syscall.LOCK_EX | syscall.LOCK_NB)
	if err == syscall.EWOULDBLOCK {
		var timedOut bool
		timedOut, err = waitBounded(func() error { return flock(syscall.LOCK_EX) }, func() { f.Close() }, l.lockTimeout)
		if timedOut {
			return flushLock{}, lockTimeoutError(f.Name(), "event log's flush", orDefault(l.lockTimeout))
		}
	}
	if err != nil {
		f.Close()
		return flushLock{}, inbox.Storage(err, "lock the event log's flush")
	}
	return flushLock{f}, nil
}

func (k flushLock) Close() error { return k.f.Close() }

// read returns the record; a missing or damaged one covers nothing.
func (k flushLock) read() flushed {
	var buf [128]byte
	n, _ := k.f.ReadAt(buf[:], 0)
	parts := strings.Fields(string(buf[:n]))
	if len(parts) != 3 {
		return flushed{}
	}
	seg, err1 := strconv.ParseInt(parts[1], 10, 64)
	off, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return flushed{}
	}
	return flushed{boot: parts[0], segment: seg, offset: off}
}

// write records that segment is on disk up to offset. The record has a
// fixed width, so it overwrites the last in place; it stays in the page
// cache (no fsync): after a crash of the machine its boot id no longer
// matches.
func (k flushLock) write(segment, offset int64) error {
	rec := fmt.Sprintf("%s %020d %020d\n", bootID(), segment, offset)
	_, err := k.f.WriteAt([]byte(rec), 0)
	return inbox.Storage(err, "record the flushed offset")
}

// setFlushed records, under the flush lock, that segment is on disk up to
// offset: for the writers that flush under the log's lock (a rotation, a
// repair), which takes the flush lock after it, as nothing takes them in
// the other order.
func (l *eventLog) setFlushed(segment, offset int64) error {
	k, err := l.lockFlush()
	if err != nil {
		return err
	}
	defer k.Close()
	return k.write(segment, offset)
}

// flush makes segment durable up to at least end (see Group commit).
func (l *eventLog) flush(f *os.File, segment, end int64) error {
	if l.unsynced || skipLogFlush {
		return nil
	}
	k, err := l.lockFlush()
	if err != nil {
		return err
	}
	defer k.Close()
	done := k.read()
	if boot := bootID(); boot != "" && done.boot == boot && (done.segment > segment || done.segment == segment && done.offset >= end) {
		// A later segment exists only once this one was flushed (see
		// appender.open), or a flush started after our write covered it.
		flushesShared.Add(1)
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return inbox.Storage(err, "stat event log")
	}
	covered := fi.Size()
	if err := fdatasync(f); err != nil {
		return inbox.Storage(err, "fsync event log")
	}
	flushesDone.Add(1)
	return k.write(segment, covered)
}

// skipLogFlush leaves out the log's flush: only for the test that shows
// the power-cut test catches its absence.
var skipLogFlush bool

// flushesDone and flushesShared count this process's log flushes and the
// flushes it was spared by another writer's (for tests of group commit).
var flushesDone, flushesShared atomic.Int64

// eventAt returns the verified body of the line that ends at p, if any.
// garbled says that a whole line does end there but fails its checksum.
func (l *eventLog) eventAt(p Pos) (body []byte, ok, garbled bool, err error) {
	body, ok, err = l.lineAt(p)
	return body, ok, !ok && body != nil, err
}

func (l *eventLog) lineAt(p Pos) ([]byte, bool, error) {
	f, err := openRead(l.segPath(p.Segment))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, inbox.Storage(err, "open event log")
	}
	defer f.Close()
	for window := int64(4096); ; window *= 4 {
		start := max(p.Offset-window, 0)
		buf := make([]byte, p.Offset-start)
		if _, err := f.ReadAt(buf, start); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, false, nil // the log is shorter than p
			}
			return nil, false, inbox.Storage(err, "read event log")
		}
		if len(buf) == 0 || buf[len(buf)-1] != '\n' {
			return nil, false, nil
		}
		i := bytes.LastIndexByte(buf[:len(buf)-1], '\n')
		if i < 0 && start > 0 && window < 1<<20 {
			continue
		}
		line := buf[i+1 : len(buf)-1]
		body, ok := checkLine(line)
		if !ok {
			return line, false, nil // a whole line, damaged
		}
		return body, ok, nil
	}
}

// repair copies the torn bytes [end, size) of a segment aside and
// truncates them. Called under the log lock.
func (l *eventLog) repair(f *os.File, first, end, size int64) error {
	torn := make([]byte, size-end)
	if _, err := f.ReadAt(torn, end); err != nil && !errors.Is(err, io.EOF) {
		return inbox.Storage(err, "read torn event log tail")
	}
	bad := filepath.Join(l.dir, fmt.Sprintf("%020d.torn-%d.bad", first, end))
	if err := publishFile(bad, l.tmpDir, l.fileMode, torn); err != nil {
		return err
	}
	if err := f.Truncate(end); err != nil {
		return inbox.Storage(err, "truncate torn event log tail")
	}
	if err := fdatasync(f); err != nil {
		return inbox.Storage(err, "fsync event log")
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	return l.setFlushed(first, end)
}

// lastID returns the id of the newest event (0 for an empty log) and the
// position just past it. It takes no lock: a concurrent append may add
// more.
func (l *eventLog) lastID() (int64, Pos, error) {
	segs, err := l.segments()
	if err != nil {
		return 0, Pos{}, err
	}
	for i := len(segs) - 1; i >= 0; i-- {
		f, err := openRead(l.segPath(segs[i]))
		if err != nil {
			return 0, Pos{}, inbox.Storage(err, "open event log")
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return 0, Pos{}, inbox.Storage(err, "stat event log")
		}
		id, end, err := tail(f, fi.Size(), segs[i])
		f.Close()
		if err != nil {
			return 0, Pos{}, inbox.Storage(err, "read event log")
		}
		if id >= segs[i] || i == 0 {
			return id, Pos{Segment: segs[i], Offset: end}, nil
		}
	}
	return 0, Pos{}, nil
}

// scan calls fn for every valid event from position from onwards (across
// segments) until fn returns false or the log ends. Torn or corrupt lines
// are skipped. The events come without the content that redoes them
// (Message, Idem, Task): scanFull reads that too.
func (l *eventLog) scan(from Pos, fn func(ev *logEvent, end Pos) bool) error {
	return l.scanFrom(from, false, fn)
}

// scanFull is scan with every member of each line, for replay.
func (l *eventLog) scanFull(from Pos, fn func(ev *logEvent, end Pos) bool) error {
	return l.scanFrom(from, true, fn)
}

func (l *eventLog) scanFrom(from Pos, full bool, fn func(ev *logEvent, end Pos) bool) error {
	segs, err := l.segments()
	if err != nil {
		return err
	}
	for _, first := range segs {
		if first < from.Segment {
			continue
		}
		off := int64(0)
		if first == from.Segment {
			off = from.Offset
		}
		more, err := l.scanSegment(first, off, full, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (l *eventLog) scanSegment(first, off int64, full bool, fn func(ev *logEvent, end Pos) bool) (bool, error) {
	f, err := openRead(l.segPath(first))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, inbox.Storage(err, "open event log")
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return false, inbox.Storage(err, "seek event log")
	}
	r := newLineReader(f)
	pos := off
	for {
		line, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return true, nil // a final line without newline is torn: ignore it
			}
			return false, inbox.Storage(err, "read event log")
		}
		pos += int64(len(line)) + 1
		body, ok := checkLine(line)
		if !ok {
			continue
		}
		var ev logEvent
		if full {
			if err := ev.decodeJSON(body); err != nil {
				continue
			}
		} else {
			var h logHead
			if err := h.decodeJSON(body); err != nil {
				continue
			}
			ev.Event, ev.State = h.Event, h.State
		}
		if !fn(&ev, Pos{Segment: first, Offset: pos}) {
			return false, nil
		}
	}
}

// lineReader yields complete newline-terminated lines.
type lineReader struct {
	r   io.Reader
	buf []byte
	beg int
	end int
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: r, buf: make([]byte, 64<<10)} }

// next returns the next complete line without its newline; the slice is
// valid until the following call. io.EOF means no complete line is left.
func (lr *lineReader) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(lr.buf[lr.beg:lr.end], '\n'); i >= 0 {
			line := lr.buf[lr.beg : lr.beg+i]
			lr.beg += i + 1
			return line, nil
		}
		if lr.beg > 0 {
			n := copy(lr.buf, lr.buf[lr.beg:lr.end])
			lr.beg, lr.end = 0, n
		}
		if lr.end == len(lr.buf) {
			nb := make([]byte, 2*len(lr.buf))
			copy(nb, lr.buf[:lr.end])
			lr.buf = nb
		}
		n, err := lr.r.Read(lr.buf[lr.end:])
		lr.end += n
		if n == 0 && err != nil {
			return nil, err
		}
	}
}

// continuesAfter reports whether the log holds anything past p.
func (l *eventLog) continuesAfter(p Pos) bool {
	if fi, err := os.Stat(l.segPath(p.Segment)); err == nil && fi.Size() > p.Offset {
		return true
	}
	segs, err := l.segments()
	return err == nil && segs[len(segs)-1] > p.Segment
}
