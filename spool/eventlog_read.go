package spool

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"

	"github.com/inbox-dev/inbox"
)

// Reading the event log: one line at a position, the last event, and
// scans from a position on (lineReader streams lines, never a whole
// segment).
//
// A line can be long: a message travels whole in the line that adds it,
// up to maxLogLine bytes. No reader assumes that a line fits a buffer. A
// reader of one line reads the 4 KiB before where it ends, which holds
// most lines whole; for a longer one it searches backwards for the
// newline before it in chunks of 64 KiB (never a window that grows and is
// read again), then reads the line into a buffer of exactly its length,
// or, when only its head and checksum are wanted (is this the thread's
// event? does the log still hold what the search index covers?), checks
// it in chunks without holding it. A scan reads ahead in a 64 KiB buffer,
// and a line that does not fit it is read into a buffer of its own
// length.

// maxLogLine is the longest line a change writes to the log (tx.go
// refuses a longer one), so the longest a reader must read: a body of
// MaxInline bytes, each at most 6 in JSON (a control character is written
// \u00XX), 384 MiB; a payload of MaxInline bytes of compact JSON, copied
// as it is, 64 MiB; up to MaxArtifacts artifacts of MaxMetadataLen bytes
// of metadata and a path of MaxPathLen, escaped, 28 MiB; extra, 256 KiB;
// the thread's state (a header: initialHeader reads one of up to
// maxHeaderBytes, 16 MiB); ids, subject and summary, a few KiB. About
// 492 MiB in all (TestLongestLineBound adds it up).
const maxLogLine = 8 * inbox.MaxInline

const (
	firstRead = 4 << 10  // what a reader of one line reads first
	chunkLen  = 64 << 10 // a scan's buffer, and the backward search's
	headLen   = 4 << 10  // the most of a body headAt returns: ids, thread, type and time come first
)

// eventAt returns the verified body of the line that ends at p, if any.
// garbled says that a whole line does end there but fails its checksum
// (or is longer than any line can be).
func (l *eventLog) eventAt(p Pos) (body []byte, ok, garbled bool, err error) {
	body, _, ok, garbled, err = l.lineAt(p, true)
	return body, ok, garbled, err
}

// headAt is eventAt for a reader that needs only the line's first bytes
// and its checksum (the CRC-32 of its body): the whole line is checked,
// but at most headLen bytes of it are returned, and a long line is never
// held in memory.
func (l *eventLog) headAt(p Pos) (head []byte, sum uint32, ok, garbled bool, err error) {
	return l.lineAt(p, false)
}

func (l *eventLog) lineAt(p Pos, whole bool) (body []byte, sum uint32, ok, garbled bool, err error) {
	f, err := openRead(l.segPath(p.Segment))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, false, false, nil
	}
	if err != nil {
		return nil, 0, false, false, inbox.Storage(err, "open event log")
	}
	defer f.Close()
	if p.Offset <= 0 {
		return nil, 0, false, false, nil
	}
	body, sum, ok, garbled, err = readLineAt(f, p.Offset, l.lineMax(), whole)
	if errors.Is(err, io.EOF) {
		return nil, 0, false, false, nil // the log is shorter than p
	}
	if err != nil {
		return nil, 0, false, false, inbox.Storage(err, "read event log")
	}
	return body, sum, ok, garbled, nil
}

// readLineAt reads the line of f that ends at end (its newline the byte
// before end), of at most max bytes; see lineAt. io.EOF means the file
// is shorter than end.
func readLineAt(f io.ReaderAt, end, max int64, whole bool) (body []byte, sum uint32, ok, garbled bool, err error) {
	win := make([]byte, min(end, firstRead))
	base := end - int64(len(win))
	if _, err := f.ReadAt(win, base); err != nil {
		return nil, 0, false, false, err
	}
	if win[len(win)-1] != '\n' {
		return nil, 0, false, false, nil // no line ends at end
	}
	if i := bytes.LastIndexByte(win[:len(win)-1], '\n'); i >= 0 || base == 0 {
		body, sum, ok := openLine(win[i+1 : len(win)-1])
		return body, sum, ok, !ok, nil
	}
	var c chunks
	start, found, err := c.newlineBefore(f, base, end-1-max)
	if err != nil {
		return nil, 0, false, false, err
	}
	if !found {
		return nil, 0, false, true, nil // longer than any line: damage
	}
	body, sum, ok, err = c.checkLineAt(f, start, end-1, whole)
	return body, sum, ok, err == nil && !ok, err
}

// lineMax is the longest line the log's readers read (maxLogLine; tests
// set less).
func (l *eventLog) lineMax() int64 {
	if l.maxLine > 0 {
		return l.maxLine
	}
	return maxLogLine
}

// openLine verifies a line (without its newline) in a buffer the caller
// hands over, and returns its body (the JSON object without the crc
// member) in place, over the line's own bytes, and the checksum. The
// buffer is changed only when the line is valid.
func openLine(line []byte) (body []byte, sum uint32, ok bool) {
	n, sum, ok := verifyLine(line)
	if !ok {
		return nil, 0, false
	}
	line[n] = '}'
	return line[:n+1], sum, true
}

// verifyLine checks a line (without its newline): it returns where its
// crc member starts and the checksum, when the line is valid.
func verifyLine(line []byte) (n int, sum uint32, ok bool) {
	if len(line) < crcSuffixLen+2 || line[0] != '{' {
		return 0, 0, false
	}
	n = len(line) - crcSuffixLen
	sum, ok = lineSum(line[n:])
	if !ok || crc32.Update(crc32.ChecksumIEEE(line[:n]), crc32.IEEETable, closeBrace) != sum {
		return 0, 0, false
	}
	return n, sum, true
}

var closeBrace = []byte{'}'}

// lineSum reads the checksum a line's last crcSuffixLen bytes give.
func lineSum(suf []byte) (uint32, bool) {
	if len(suf) != crcSuffixLen || !bytes.HasPrefix(suf, []byte(`,"crc":"`)) || suf[len(suf)-2] != '"' || suf[len(suf)-1] != '}' {
		return 0, false
	}
	var v uint32
	for _, c := range suf[8:16] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(c)
	}
	return v, true
}

// chunks is the buffer a reader of long lines reads them through, made
// when first needed.
type chunks struct{ buf []byte }

func (c *chunks) get() []byte {
	if c.buf == nil {
		c.buf = make([]byte, chunkLen)
	}
	return c.buf
}

// newlineBefore searches f's bytes before pos backwards, a chunk at a
// time, for a newline, and returns the offset just past it (0 when there
// is none: the start of the file). It gives up (found false) when that
// offset would be before stop.
func (c *chunks) newlineBefore(f io.ReaderAt, pos, stop int64) (start int64, found bool, err error) {
	for pos > 0 {
		if pos < stop {
			return 0, false, nil
		}
		buf := c.get()
		n := min(pos, int64(len(buf)))
		b := buf[:n]
		if _, err := f.ReadAt(b, pos-n); err != nil {
			return 0, false, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			start = pos - n + int64(i) + 1
			return start, start >= stop, nil
		}
		pos -= n
	}
	return 0, stop <= 0, nil
}

// checkLineAt verifies the line of f at [start, end) (without its
// newline). whole reads it into a buffer of its length and returns its
// body, as openLine does; otherwise it is checked a chunk at a time and
// only its first headLen bytes are returned.
func (c *chunks) checkLineAt(f io.ReaderAt, start, end int64, whole bool) (body []byte, sum uint32, ok bool, err error) {
	if whole {
		line := make([]byte, end-start)
		if _, err := f.ReadAt(line, start); err != nil {
			return nil, 0, false, err
		}
		body, sum, ok = openLine(line)
		return body, sum, ok, nil
	}
	if end-start < crcSuffixLen+2 {
		return nil, 0, false, nil
	}
	var suf [crcSuffixLen]byte
	if _, err := f.ReadAt(suf[:], end-crcSuffixLen); err != nil {
		return nil, 0, false, err
	}
	want, ok := lineSum(suf[:])
	if !ok {
		return nil, 0, false, nil
	}
	var head []byte
	var crc uint32
	buf := c.get()
	for off, stop := start, end-crcSuffixLen; off < stop; {
		b := buf[:min(int64(len(buf)), stop-off)]
		if _, err := f.ReadAt(b, off); err != nil {
			return nil, 0, false, err
		}
		if head == nil {
			if b[0] != '{' {
				return nil, 0, false, nil
			}
			head = bytes.Clone(b[:min(len(b), headLen)])
		}
		crc = crc32.Update(crc, crc32.IEEETable, b)
		off += int64(len(b))
	}
	if crc32.Update(crc, crc32.IEEETable, closeBrace) != want {
		return nil, 0, false, nil
	}
	return head, want, true, nil
}

// lastLine finds the last complete, checksummed line of a file of the
// given size that accept approves (lines of more than max bytes are not
// tried), and returns its body (nil if there is none) and the offset
// just past it. Bytes after that offset are a torn tail. With whole
// false, accept and the caller get only the first headLen bytes of a
// long line's body (see headAt).
func lastLine(f io.ReaderAt, size, max int64, whole bool, accept func([]byte) bool) (body []byte, end int64, err error) {
	if size <= 0 {
		return nil, 0, nil
	}
	win := make([]byte, min(size, firstRead))
	base := size - int64(len(win))
	if _, err := f.ReadAt(win, base); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	// Whole lines inside the first read, backwards from its last newline
	// (a header or an event line is most often well inside it).
	stop := bytes.LastIndexByte(win, '\n')
	for stop >= 0 {
		start := bytes.LastIndexByte(win[:stop], '\n') + 1
		if start == 0 && base > 0 {
			break // the line may begin before the first read
		}
		if body, _, ok := openLine(win[start:stop]); ok && accept(body) {
			return body, base + int64(stop) + 1, nil
		}
		stop = start - 1
	}
	if base == 0 {
		return nil, 0, nil
	}
	// Before it, a line at a time, each found with a backward search.
	var c chunks
	e, from := base+int64(stop)+1, base // a line's end, and where its newline search starts
	if stop < 0 {
		// No newline in the first read: a torn tail longer than it.
		if e, _, err = c.newlineBefore(f, base, -1); err != nil {
			return nil, 0, err
		}
		from = e - 1
	}
	for e > 0 {
		start, _, err := c.newlineBefore(f, from, -1)
		if err != nil {
			return nil, 0, err
		}
		if e-1-start <= max {
			body, _, ok, err := c.checkLineAt(f, start, e-1, whole)
			if err != nil {
				return nil, 0, err
			}
			if ok && accept(body) {
				return body, e, nil
			}
		}
		e, from = start, start-1
	}
	return nil, 0, nil
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
		id, end, err := tail(f, fi.Size(), segs[i], l.lineMax())
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
	r := newLineReader(f, off, l.lineMax())
	for {
		line, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return true, nil // a final line without newline is torn: ignore it
			}
			return false, inbox.Storage(err, "read event log")
		}
		body, _, ok := openLine(line)
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
		if !fn(&ev, Pos{Segment: first, Offset: r.pos}) {
			return false, nil
		}
	}
}

// lineReader yields the complete newline-terminated lines of a file from
// an offset on. Lines that fit its buffer are read through it; a longer
// line is found reading ahead and then read into a buffer of its own
// length; one longer than max, which cannot be a valid line, is returned
// empty.
type lineReader struct {
	f        io.ReaderAt
	max      int64
	buf      []byte
	off      int64 // the file offset of buf[0]
	beg, end int   // the unread bytes in buf
	pos      int64 // the offset just past the last line returned
	seen     int64 // the offset up to which the file has been read
}

func newLineReader(f io.ReaderAt, off, max int64) *lineReader {
	return &lineReader{f: f, max: max, buf: make([]byte, chunkLen), off: off, pos: off, seen: off}
}

// next returns the next complete line without its newline; the slice is
// valid until the following call, and the caller may change its bytes.
// io.EOF means no complete line is left (rest says how many bytes
// follow the last one).
func (lr *lineReader) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(lr.buf[lr.beg:lr.end], '\n'); i >= 0 {
			line := lr.buf[lr.beg : lr.beg+i]
			lr.beg += i + 1
			lr.pos = lr.off + int64(lr.beg)
			return line, nil
		}
		if lr.beg > 0 {
			n := copy(lr.buf, lr.buf[lr.beg:lr.end])
			lr.off += int64(lr.beg)
			lr.beg, lr.end = 0, n
		}
		if lr.end == len(lr.buf) {
			return lr.long()
		}
		n, err := lr.f.ReadAt(lr.buf[lr.end:], lr.off+int64(lr.end))
		lr.end += n
		lr.seen = max(lr.seen, lr.off+int64(lr.end))
		if n == 0 && err != nil {
			return nil, err
		}
	}
}

// long reads the line that starts at the buffer's start and does not fit
// it: it reads on through the buffer to the line's newline, keeping only
// what follows it, then reads the line into a buffer of its length.
func (lr *lineReader) long() ([]byte, error) {
	start := lr.off
	n := int64(lr.end) // [start, start+n) holds no newline
	for {
		k, err := lr.f.ReadAt(lr.buf, start+n)
		lr.seen = max(lr.seen, start+n+int64(k))
		if i := bytes.IndexByte(lr.buf[:k], '\n'); i >= 0 {
			length := n + int64(i)
			lr.off = start + length + 1
			lr.beg, lr.end = 0, copy(lr.buf, lr.buf[i+1:k])
			lr.pos = lr.off
			if length > lr.max {
				return []byte{}, nil // longer than any line: damage
			}
			line := make([]byte, length)
			if _, err := lr.f.ReadAt(line, start); err != nil {
				return nil, err
			}
			return line, nil
		}
		n += int64(k)
		if err != nil {
			// The buffer holds the bytes last read, none of the line's
			// start: read again from there on the next call.
			lr.beg, lr.end = 0, 0
			return nil, err
		}
	}
}

// rest is how many bytes the reader has seen past the last complete line.
func (lr *lineReader) rest() int64 { return lr.seen - lr.pos }

// continuesAfter reports whether the log holds anything past p.
func (l *eventLog) continuesAfter(p Pos) bool {
	if fi, err := os.Stat(l.segPath(p.Segment)); err == nil && fi.Size() > p.Offset {
		return true
	}
	segs, err := l.segments()
	return err == nil && segs[len(segs)-1] > p.Segment
}
