package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
// An append takes events.lock (reserve), reads the last line to learn
// the last id and where the segment ends, writes its whole lines (one
// change's, or a batch's) with one write, and unlocks; that makes ids
// unique and increasing across processes. Only then are the lines made
// durable, with group commit (groupcommit.go), so that writers share
// fdatasyncs instead of taking turns for them under the lock. A torn
// tail (a crash mid-append) is copied aside to a .bad file and truncated
// by the next writer; readers only ever consume complete lines whose CRC
// matches (eventlog_read.go).

const segSuffix = ".jsonl"

// crcSuffixLen is len(`,"crc":"01234567"}`).
const crcSuffixLen = 18

type eventLog struct {
	dir      string
	lockPath string
	tmpDir   string
	segBytes int64
	fileMode os.FileMode
	maxLine  int64 // the longest line read (0: maxLogLine, see lineMax)
	// held is set in the view of a Store that holds events.lock for a
	// whole upkeep run (lockAllToWrite): its appends must not take it
	// again.
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
// object it carries without the crc member, in a new buffer (openLine
// opens it in place).
func checkLine(line []byte) ([]byte, bool) {
	n, _, ok := verifyLine(line)
	if !ok {
		return nil, false
	}
	body := make([]byte, n+1)
	copy(body, line[:n])
	body[n] = '}'
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

// tail finds the last valid event, of at most max bytes, in a segment of
// the given size. It returns its id (first-1 when the segment holds
// none) and the offset where valid data ends.
func tail(f *os.File, size, first, max int64) (lastID, end int64, err error) {
	body, end, err := lastLine(f, size, max, false, func(b []byte) bool { _, ok := lineID(b); return ok })
	if err != nil || body == nil {
		return first - 1, end, err
	}
	id, _ := lineID(body)
	return id, end, nil
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
func (l *eventLog) reserve(ctx context.Context) (*appender, error) {
	a := &appender{l: l}
	if !l.held {
		lk := newLock(l.lockPath, l.fileMode)
		if err := lockWithin(ctx, lk, "event log", l.lockTimeout); err != nil {
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
func (l *eventLog) cutTail(ctx context.Context) error {
	a, err := l.reserve(ctx)
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
	lastID, end, err := tail(f, fi.Size(), first, l.lineMax())
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
func (l *eventLog) append(ctx context.Context, ev *logEvent) (int64, Pos, error) {
	return l.appendAfter(ctx, ev, nil)
}

// appendAfter is append that first runs before, with the event's id set,
// under the log's lock: for a change whose files name their event (a
// team's), written before the line that commits them.
func (l *eventLog) appendAfter(ctx context.Context, ev *logEvent, before func() error) (int64, Pos, error) {
	a, err := l.reserve(ctx)
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
