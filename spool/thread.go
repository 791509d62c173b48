package spool

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/index"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// A thread's files, and reading them. A thread is a directory under
// threads/ (archive/threads/ once archived) holding its messages, one
// file each (m-00000001.json, …, the first carrying the thread's initial
// header), its header log (thread.log), its lease (lease.json), read
// cursors (cursor-<agent>.log) and idempotency records. Writing them
// together is tx.go's; settling what a crash left, settle.go's.

// Files inside a thread directory.
const (
	headerLog = "thread.log" // the header: one checksummed JSON line per change
	leaseFile = "lease.json" // the lease: one checksummed JSON line, rewritten in place
)

// maxHeaderLog and maxCursorLog are the sizes past which a thread's header
// log or a read-cursor log is compacted to its last line.
const (
	maxHeaderLog = 1 << 20
	maxCursorLog = 64 << 10
)

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
	// IdempotencyArgs is what that send was given (inbox.NewThreadArgs).
	IdempotencyArgs string `json:"idempotency_args,omitempty"`
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
			newest = ev.stateAt(end)
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
// is rewritten from it (loadForWrite; replay after a power cut).
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

// threadIDs lists the thread directories.
func (s *Store) threadIDs() ([]string, error) {
	return names(s.threadsRoot(), "threads")
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
