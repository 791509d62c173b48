package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// The event log's readers at every line length: a line of any size up to
// the largest a change can write (maxLogLine) reads back whole, at the
// boundaries of every buffer and window the readers use.

// lineOfLen is a checksummed event line of exactly n bytes, newline
// included, with event id id, and its body.
func lineOfLen(t *testing.T, id int64, n int) (line, body []byte) {
	t.Helper()
	pre := fmt.Sprintf(`{"event_id":%d,"thread_id":"thr_lines","pad":"`, id)
	pad := n - len(pre) - len(`"`) - crcSuffixLen - len("\n")
	if pad < 0 {
		t.Fatalf("no line of %d bytes", n)
	}
	var b strings.Builder
	b.WriteString(pre)
	for i := range pad {
		b.WriteByte("abcdefghij"[i%10])
	}
	b.WriteString(`"}`)
	body = []byte(b.String())
	line = encodeLine(body)
	if len(line) != n {
		t.Fatalf("line of %d bytes, want %d", len(line), n)
	}
	return line, body
}

// lineLengths are the line lengths (newline included) the readers are
// tried at: around 4 KiB (the first read), 64 KiB (a scan's buffer and the
// backward search's chunk), 1 MiB (where the reader of one line used to
// give up) and past it.
var lineLengths = []int{80, 4095, 4096, 4097, 8193, 64<<10 - 1, 64 << 10, 64<<10 + 1, 128<<10 + 1,
	1<<20 - 1, 1 << 20, 1<<20 + 1, 1<<20 + 2, 3<<20 + 7, 16<<20 + 3}

type testLine struct {
	id   int64
	body []byte
	end  Pos
}

// writeLines writes a segment holding, for each of lengths, a line of
// that length and then a short one; the segment starts with a long line.
func writeLines(t *testing.T, l *eventLog, lengths []int) ([]testLine, int64) {
	t.Helper()
	segs, err := l.segments()
	if err != nil {
		t.Fatal(err)
	}
	first := segs[len(segs)-1]
	f, err := os.OpenFile(l.segPath(first), os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []testLine
	var off int64
	id := first
	add := func(n int) {
		line, body := lineOfLen(t, id, n)
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
		off += int64(len(line))
		lines = append(lines, testLine{id: id, body: body, end: Pos{Segment: first, Offset: off}})
		id++
	}
	for _, n := range lengths {
		add(n)
		add(100)
	}
	return lines, first
}

// allocated is how many bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLogLinesOfEveryLength: every reader of the log (one line at a
// position, the last line, a scan with and without the message) reads
// each line whole, whatever its length, and allocates no more than the
// line needs.
func TestLogLinesOfEveryLength(t *testing.T) {
	s, _ := openTemp(t)
	l := s.log
	lines, first := writeLines(t, l, lineLengths)
	const slack = 256 << 10 // buffers and what the decoding of a head costs

	for _, tl := range lines {
		var body []byte
		var ok, garbled bool
		var err error
		n := allocated(func() { body, ok, garbled, err = l.eventAt(tl.end) })
		if err != nil || !ok || garbled || !bytes.Equal(body, tl.body) {
			t.Errorf("eventAt(%v) of line %d (%d bytes): ok %v garbled %v err %v, body of %d bytes, want the line's %d",
				tl.end, tl.id, len(tl.body), ok, garbled, err, len(body), len(tl.body))
		}
		if n > uint64(len(tl.body))+slack {
			t.Errorf("eventAt of a %d-byte line allocated %d bytes", len(tl.body), n)
		}
		// One byte short of the line's end is no line's end.
		short := Pos{Segment: tl.end.Segment, Offset: tl.end.Offset - 1}
		if body, ok, garbled, err := l.eventAt(short); ok || garbled || err != nil {
			t.Errorf("eventAt(%v), inside line %d: %d bytes, ok %v garbled %v err %v", short, tl.id, len(body), ok, garbled, err)
		}
		var head []byte
		var crc uint32
		n = allocated(func() { head, crc, ok, garbled, err = l.headAt(tl.end) })
		if id, _ := lineID(head); err != nil || !ok || garbled || id != tl.id || !bytes.HasPrefix(tl.body, head) || crc != crc32.ChecksumIEEE(tl.body) {
			t.Errorf("headAt(%v) of line %d: id %d, ok %v garbled %v err %v", tl.end, tl.id, id, ok, garbled, err)
		}
		if n > slack {
			t.Errorf("headAt of a %d-byte line allocated %d bytes", len(tl.body), n)
		}
	}

	for _, full := range []bool{false, true} {
		var got []Pos
		var ids []int64
		n := allocated(func() {
			err := l.scanFrom(Pos{Segment: first}, full, func(ev *logEvent, end Pos) bool {
				got, ids = append(got, end), append(ids, ev.EventID)
				return true
			})
			if err != nil {
				t.Errorf("scan: %v", err)
			}
		})
		if len(got) != len(lines) {
			t.Fatalf("scan (full %v) read %d lines, want %d", full, len(got), len(lines))
		}
		for i, tl := range lines {
			if got[i] != tl.end || ids[i] != tl.id {
				t.Errorf("scan (full %v): line %d ends at %v (id %d), want %v (id %d)", full, i, got[i], ids[i], tl.end, tl.id)
			}
		}
		// The largest line, once, and each line's own bytes to decode.
		var total, largest uint64
		for _, tl := range lines {
			total += uint64(len(tl.body))
			largest = max(largest, uint64(len(tl.body)))
		}
		if limit := largest + total + uint64(len(lines))*4096 + slack; n > limit {
			t.Errorf("scan (full %v) of %d bytes allocated %d bytes (more than %d)", full, total, n, limit)
		}
	}

	// The last line, with the log cut back line by line, a torn half of
	// the next line after it.
	p := l.segPath(first)
	for i := len(lines) - 1; i >= 0; i-- {
		want := lines[i]
		var id int64
		var end Pos
		var err error
		n := allocated(func() { id, end, err = l.lastID() })
		if err != nil || id != want.id || end != want.end {
			t.Errorf("lastID with line %d last: %d %v %v, want %d %v", i, id, end, err, want.id, want.end)
		}
		if n > slack {
			t.Errorf("lastID with a %d-byte last line allocated %d bytes", len(want.body), n)
		}
		body, err := readLastLine(p)
		if err != nil || !bytes.Equal(body, want.body) {
			t.Errorf("readLastLine with line %d last: %d bytes, %v; want %d bytes", i, len(body), err, len(want.body))
		}
		if i == 0 {
			break
		}
		prev := lines[i-1].end.Offset
		torn := prev + (want.end.Offset-prev)/2
		if err := os.Truncate(p, torn); err != nil {
			t.Fatal(err)
		}
		if id, end, err := l.lastID(); err != nil || id != lines[i-1].id || end != lines[i-1].end {
			t.Errorf("lastID with line %d torn: %d %v %v, want %d %v", i, id, end, err, lines[i-1].id, lines[i-1].end)
		}
		if err := os.Truncate(p, prev); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogLineDamaged: a long line whose checksum fails is a damaged line
// (eventAt says garbled), skipped by scans, passed over by lastLine; a
// stretch without a newline longer than any line can be is no line (the
// test lowers that length to 8 MiB).
func TestLogLineDamaged(t *testing.T) {
	s, _ := openTemp(t)
	l := s.log
	l.maxLine = 8 << 20
	lines, first := writeLines(t, l, []int{3<<20 + 5, 2 << 20})
	p := l.segPath(first)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Damage the last long line (the third) in its middle.
	mid := lines[1].end.Offset + (lines[2].end.Offset-lines[1].end.Offset)/2
	if _, err := f.WriteAt([]byte("X"), mid); err != nil {
		t.Fatal(err)
	}
	if body, ok, garbled, err := l.eventAt(lines[2].end); ok || !garbled || err != nil {
		t.Errorf("eventAt of the damaged line: %d bytes ok %v garbled %v err %v", len(body), ok, garbled, err)
	}
	var ids []int64
	if err := l.scan(Pos{Segment: first}, func(ev *logEvent, _ Pos) bool { ids = append(ids, ev.EventID); return true }); err != nil {
		t.Fatal(err)
	}
	if want := []int64{lines[0].id, lines[1].id, lines[3].id}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("scan past a damaged line: %v, want %v", ids, want)
	}
	// Cut the short line after it: the damaged line is last, lastID
	// passes over it.
	if err := f.Truncate(lines[2].end.Offset); err != nil {
		t.Fatal(err)
	}
	if id, end, err := l.lastID(); err != nil || id != lines[1].id || end != lines[1].end {
		t.Errorf("lastID past a damaged last line: %d %v %v, want %d %v", id, end, err, lines[1].id, lines[1].end)
	}
	// Bytes without a newline, longer than any line, then a newline.
	junk := bytes.Repeat([]byte("j"), 1<<20)
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	w := int64(0)
	for w <= l.maxLine {
		if _, err := f.Write(junk); err != nil {
			t.Fatal(err)
		}
		w += int64(len(junk))
	}
	if _, err := f.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	end := Pos{Segment: first, Offset: lines[2].end.Offset + w + 1}
	var garbled bool
	n := allocated(func() { _, _, garbled, err = l.eventAt(end) })
	if err != nil || !garbled {
		t.Errorf("eventAt after %d bytes without a newline: garbled %v, err %v", w, garbled, err)
	}
	if n > 1<<20 {
		t.Errorf("eventAt after %d bytes without a newline allocated %d bytes", w, n)
	}
	if id, _, err := l.lastID(); err != nil || id != lines[1].id {
		t.Errorf("lastID past an overlong line: %d %v, want %d", id, err, lines[1].id)
	}
	if err := l.scan(Pos{Segment: first}, func(*logEvent, Pos) bool { return true }); err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("scan past an overlong line: %v", err)
	}
}

// TestLongestLineBound: maxLogLine is above the longest line a change
// can write: a message with every field validation allows at its limit,
// each string of control characters (six bytes each in JSON), with a body
// and a payload of MaxInline bytes, and a thread state of up to
// maxHeaderBytes.
func TestLongestLineBound(t *testing.T) {
	ctrl := func(n int) string { return strings.Repeat("\x01", n) }
	meta := json.RawMessage(`{"k":"` + strings.Repeat("x", inbox.MaxMetadataLen-8) + `"}`)
	m := inbox.Message{MessageID: ctrl(inbox.MaxIDLen), ThreadID: ctrl(inbox.MaxIDLen), Seq: 1 << 30,
		FromAgent: ctrl(inbox.MaxNameLen), ToAgent: ctrl(inbox.MaxNameLen), Kind: ctrl(inbox.MaxNameLen),
		Type: ctrl(inbox.MaxNameLen), Summary: ctrl(inbox.MaxSummaryLen), PayloadJSON: json.RawMessage("{}"),
		CreatedAt: ctrl(40), EventID: 1 << 62, Status: ctrl(inbox.MaxNameLen), RequestID: ctrl(inbox.MaxIDLen),
		AckID: ctrl(inbox.MaxIDLen), Timestamp: ctrl(40), Extra: meta}
	for range inbox.MaxArtifacts {
		m.Artifacts = append(m.Artifacts, inbox.Artifact{ArtifactID: ctrl(inbox.MaxIDLen), MessageID: ctrl(inbox.MaxIDLen),
			Path: ctrl(inbox.MaxPathLen), Kind: ctrl(inbox.MaxNameLen), MetadataJSON: meta, CreatedAt: ctrl(40)})
	}
	h := &header{}
	h.Subject = ctrl(inbox.MaxSubjectLen)
	ev := &logEvent{Event: inbox.Event{EventID: 1 << 62, RunID: ctrl(inbox.MaxIDLen), TaskID: ctrl(inbox.MaxIDLen),
		ThreadID: ctrl(inbox.MaxIDLen), Summary: ctrl(maxEventSumLen), PayloadJSON: json.RawMessage("{}")},
		State: h, Idem: &idemRecord{Key: ctrl(inbox.MaxIdemKeyLen)}, Task: ctrl(inbox.MaxIDLen),
		Message: &msgFile{IdempotencyKey: ctrl(inbox.MaxIdemKeyLen), Message: m}}
	rest := len(encodeEvent(ev))
	// The body: six bytes a byte at most.
	if n := jsonrec.StringLen(ctrl(1000)); n != 6*1000+2 {
		t.Fatalf("a string of 1000 control characters is %d bytes in JSON, want %d", n, 6*1000+2)
	}
	longest := int64(rest) + 6*inbox.MaxInline + inbox.MaxInline + maxHeaderBytes
	if longest > maxLogLine {
		t.Errorf("the longest line a change can write is about %d bytes, over maxLogLine (%d)", longest, maxLogLine)
	}
	t.Logf("the longest line: %d bytes (%.1f MiB) of maxLogLine's %d MiB", longest, float64(longest)/(1<<20), maxLogLine>>20)
}
