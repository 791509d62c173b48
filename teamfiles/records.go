package teamfiles

import (
	"bufio"
	"bytes"
	"io"
)

// An inbox file holds one seed-002 message per line, but seed 002's own
// clean-up recipe rewrites it with a jq filter that pretty-prints (no
// -c): each message becomes an object over several lines, "{" alone on
// the first, its members indented, "}" alone on the last. The bridge
// reads both as records; anything else that is not one JSON object per
// line is a malformed line (errors.log), as before.

// maxRecord bounds an object spread over several lines; past it, its
// first line counts as malformed and the lines after it are read again.
const maxRecord = 64 << 20

// record is one message of an inbox file.
type record struct {
	line  int64  // the number of its first line (1-based)
	lines int64  // how many lines it spans
	end   int64  // the offset just past it
	body  []byte // its text, trimmed
}

// recordReader reads the whole records of an inbox file from an offset
// on; a record not ended by a newline yet is left for the next read.
type recordReader struct {
	r    *bufio.Reader
	off  int64 // where the next record begins
	line int64 // the lines before it
	back [][]byte
	eof  bool
}

func newRecordReader(r io.Reader, off, line int64) *recordReader {
	return &recordReader{r: bufio.NewReaderSize(r, 64<<10), off: off, line: line}
}

// readLine returns the next whole line (with its newline), false at the
// end of what is whole.
func (rr *recordReader) readLine() ([]byte, bool) {
	if n := len(rr.back); n > 0 {
		l := rr.back[n-1]
		rr.back = rr.back[:n-1]
		return l, true
	}
	if rr.eof {
		return nil, false
	}
	l, err := rr.r.ReadBytes('\n')
	if err != nil {
		rr.eof = true
		return nil, false
	}
	return l, true
}

// next returns the next whole record; false when there is none yet.
func (rr *recordReader) next() (record, bool) {
	first, ok := rr.readLine()
	if !ok {
		return record{}, false
	}
	rec := record{line: rr.line + 1, lines: 1, end: rr.off + int64(len(first)), body: bytes.TrimSpace(first)}
	if string(rec.body) == "{" && first[0] == '{' {
		lines := [][]byte{first}
		size := len(first)
		for {
			l, ok := rr.readLine()
			if !ok {
				// The object is not whole yet: leave all of it for later.
				for i := len(lines) - 1; i >= 1; i-- {
					rr.back = append(rr.back, lines[i])
				}
				rr.back = append(rr.back, lines[0])
				rr.eof = true
				return record{}, false
			}
			if l[0] == '}' && len(bytes.TrimSpace(l)) == 1 {
				lines = append(lines, l)
				rec.lines = int64(len(lines))
				rec.body = bytes.TrimSpace(bytes.Join(lines, nil))
				rec.end = rr.off + int64(size+len(l))
				break
			}
			if l[0] != ' ' && l[0] != '\t' || size+len(l) > maxRecord {
				// Not one of jq's objects: "{" alone is a malformed line,
				// and the lines after it are read again.
				rr.back = append(rr.back, l)
				for i := len(lines) - 1; i >= 1; i-- {
					rr.back = append(rr.back, lines[i])
				}
				break
			}
			lines = append(lines, l)
			size += len(l)
		}
	}
	rr.off = rec.end
	rr.line += rec.lines
	return rec, true
}

// eachRecord calls fn for every whole record of r.
func eachRecord(r io.Reader, fn func(rec record)) {
	rr := newRecordReader(r, 0, 0)
	for {
		rec, ok := rr.next()
		if !ok {
			return
		}
		fn(rec)
	}
}
