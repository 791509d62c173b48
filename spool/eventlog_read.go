package spool

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/inbox-dev/inbox"
)

// Reading the event log: one line at a position, the last event, and
// scans from a position on (lineReader streams lines, never a whole
// segment).

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
