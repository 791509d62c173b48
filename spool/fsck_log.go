package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
)

// fsck's side of the event log: one pass over its segments that reports
// torn, garbled and out-of-order lines and learns what the thread checks
// compare against (logIndex), and the repairs that restore the log:
// cutting a torn tail, restoring damage inside the log under the events'
// own ids (restoreGaps), starting a lost log again (restartLog).

// restartLog starts an empty event log after the highest event id any
// thread header or message names, so that ids never go backwards; the
// threads' own events are then appended again by the thread checks.
func (s *Store) restartLog() error {
	var top int64
	tids, err := s.threadIDs()
	if err != nil {
		return err
	}
	for _, tid := range tids {
		h, err := s.readHeader(tid)
		if err != nil {
			continue
		}
		top = max(top, h.LastEventID)
		if m, err := s.readMessage(tid, h.MessageCount); err == nil {
			top = max(top, m.EventID)
		}
	}
	f, err := openFile(s.log.segPath(top+1), os.O_CREATE|os.O_EXCL|os.O_WRONLY, s.fileMode)
	if err != nil {
		return inbox.Storage(err, "start the event log")
	}
	f.Close()
	return syncDir(s.log.dir)
}

// logIndex is what fsck learns from the event log (and, in blobs, from
// the messages as it reads them).
type logIndex struct {
	ids    map[int64]string                    // event id → thread id
	msgs   map[string]int64                    // message id → event id
	adds   map[string]*inbox.Event             // "thread#seq" → the event that added that message
	addAt  map[string]Pos                      // "thread#seq" → where that event's line ends (messageFromLog reads it)
	reads  map[string]map[string]*inbox.Cursor // thread → agent → the newest cursor the log records
	newest map[string]*logEvent
	// newestAt is where the line of newest[thread] ends: where the
	// thread's header must point when that event is its last (the writer
	// looks for it there, fsckMessageFiles checks it).
	newestAt map[string]Pos
	first    int64               // the first id of the oldest segment still in the log
	last     int64               // the id of the last valid event read so far
	blobs    map[string]blobMeta // blob path → what a message says of it
	gaps     []*logGap           // damage inside the log
}

// hasOwnEvent is Store.hasOwnEvent answered from the index: the header's
// last event is in the log and belongs to its thread (or was archived).
func (li *logIndex) hasOwnEvent(h *header) bool {
	if h.LastEventID == 0 {
		return false
	}
	if h.LastEventID < li.first || li.inGap(h.LastEventID) {
		return true
	}
	return li.ids[h.LastEventID] == h.ThreadID
}

// noteRead records a thread.read event as the newest cursor of its
// agent. (The read a claim or a finish records, readOf, is not checked:
// its cursor line comes after the change stood, and a full disk may
// refuse it; replay after a power cut restores it, and the agent's next
// read moves the cursor past it.)
func (li *logIndex) noteRead(ev *logEvent) {
	if ev.EventType != inbox.EventThreadRead {
		return
	}
	c, ok := readOf(ev)
	if !ok {
		return
	}
	byAgent := li.reads[ev.ThreadID]
	if byAgent == nil {
		byAgent = map[string]*inbox.Cursor{}
		li.reads[ev.ThreadID] = byAgent
	}
	if old := byAgent[ev.Agent]; old == nil || c.LastReadSeq > old.LastReadSeq {
		byAgent[ev.Agent] = c
	}
}

func addKey(tid string, seq int) string { return tid + "#" + strconv.Itoa(seq) }

// messageFromLog reads message seq of thread tid back from the log line
// of the event that added it (since format 2 every such line carries the
// whole message); nil when the log no longer holds that line.
func (s *Store) messageFromLog(tid string, seq int, li *logIndex) (*logEvent, Pos, error) {
	pos, ok := li.addAt[addKey(tid, seq)]
	if !ok {
		return nil, Pos{}, nil
	}
	body, ok, _, err := s.log.eventAt(pos)
	if err != nil || !ok {
		return nil, Pos{}, err
	}
	var ev logEvent
	if ev.decodeJSON(body) != nil || ev.Message == nil || ev.Message.Seq != seq || ev.ThreadID != tid {
		return nil, Pos{}, nil
	}
	return &ev, pos, nil
}

// fsckLog reads the whole log, a line at a time, and returns what it
// learnt; it reports torn, garbled and out-of-order lines, and cuts on
// repair what a crash left at the log's end. Damage inside the log is
// restored later, once the threads are read (restoreGaps).
func (s *Store) fsckLog(ctx context.Context, r *inbox.FsckReport, add addFinding, repair bool) (*logIndex, error) {
	li := &logIndex{ids: map[int64]string{}, msgs: map[string]int64{}, adds: map[string]*inbox.Event{},
		addAt: map[string]Pos{}, reads: map[string]map[string]*inbox.Cursor{}, newest: map[string]*logEvent{}, newestAt: map[string]Pos{}, blobs: map[string]blobMeta{}}
	segs, err := s.log.segments()
	if err != nil {
		return nil, err
	}
	li.first = segs[0]
	for i, first := range segs {
		if err := s.fsckSegment(ctx, li, first, repair && i == len(segs)-1, add); err != nil {
			return nil, err
		}
	}
	for _, g := range li.gaps {
		f := add(inbox.Finding{Check: "corrupt_event_log", Path: s.log.segPath(g.seg),
			Detail: fmt.Sprintf("bytes %d to %d fail their checksum; readers skip them", g.start, g.end)})
		g.finding = len(r.Findings) - 1
		if g.next == 0 && repair {
			// At the very end: what a power cut leaves of appends never
			// acknowledged. The next writer would cut it; so does repair,
			// keeping a copy.
			if err := s.log.cutTail(ctx); err != nil {
				return nil, err
			}
			f.Detail += "; cut (the end of the log), a copy kept"
			f.Repaired = true
		}
	}
	return li, nil
}

// fsckSegment reads the segment whose first id is first into li; with
// cut (a repair of the log's last segment) it cuts a torn or garbled
// last line, keeping a copy.
func (s *Store) fsckSegment(ctx context.Context, li *logIndex, first int64, cut bool, add addFinding) error {
	p := s.log.segPath(first)
	// Streamed a line at a time: a segment holding a large message is
	// never read into memory whole.
	sf, err := openRead(p)
	if err != nil {
		return inbox.Storage(err, "read %s", p)
	}
	defer sf.Close()
	fi, err := sf.Stat()
	if err != nil {
		return inbox.Storage(err, "read %s", p)
	}
	size := fi.Size()
	lr := newLineReader(sf, 0, s.log.lineMax())
	for {
		start := lr.pos
		line, err := lr.next()
		if err != nil && !errors.Is(err, io.EOF) {
			return inbox.Storage(err, "read %s", p)
		}
		if err != nil && lr.rest() == 0 {
			return nil
		}
		if err != nil {
			f := add(inbox.Finding{Check: "torn_event_log", Path: p,
				Detail: fmt.Sprintf("%d bytes after the last complete line (a crash mid-append)", lr.rest())})
			if cut {
				if err := s.log.cutTail(ctx); err != nil {
					return err
				}
				f.Repaired = true
			}
			return nil
		}
		off := lr.pos
		body, _, ok := openLine(line)
		// The line's head only: the message it carries is read again
		// from where the line ends when a file must be rebuilt from it
		// (messageFromLog), never held for the whole log.
		var head logHead
		if ok && head.decodeJSON(body) != nil {
			ok = false
		}
		if ok {
			if head.EventID <= li.last {
				add(inbox.Finding{Check: "event_order", Path: p,
					Detail: fmt.Sprintf("event %d follows event %d", head.EventID, li.last)})
			}
			li.note(&logEvent{Event: head.Event, State: head.State}, Pos{Segment: first, Offset: off})
			continue
		}
		if cut && off >= size {
			// The log's last line: what a power cut leaves of an append
			// it never acknowledged. Cut it, keeping a copy.
			f := add(inbox.Finding{Check: "corrupt_event_log", Path: p,
				Detail: fmt.Sprintf("the last line, at byte %d, fails its checksum", start)})
			if err := s.log.cutTail(ctx); err != nil {
				return err
			}
			f.Repaired = true
			continue
		}
		// Damage inside the log: the events it hid are restored under
		// their own ids once the threads are read (restoreGaps).
		if g := li.lastGap(); g != nil && g.seg == first && g.end == start && g.next == 0 {
			g.end = off // the next bad line of the same damage
		} else {
			li.gaps = append(li.gaps, &logGap{seg: first, start: start, end: off, prev: li.last})
		}
	}
}

// note records a valid event, whose line ends at end, in li.
func (li *logIndex) note(ev *logEvent, end Pos) {
	if g := li.lastGap(); g != nil && g.next == 0 {
		g.next = ev.EventID
	}
	li.last = ev.EventID
	li.ids[ev.EventID] = ev.ThreadID
	if ev.MessageID != "" && ev.EventType != inbox.EventThreadRead {
		li.msgs[ev.MessageID] = ev.EventID
	}
	li.noteRead(ev)
	if ev.State != nil {
		li.newest[ev.ThreadID] = ev
		li.newestAt[ev.ThreadID] = end
		if ev.MessageID != "" && ev.EventType != inbox.EventThreadRead {
			a := ev.Event
			k := addKey(ev.ThreadID, ev.State.MessageCount)
			li.adds[k] = &a
			li.addAt[k] = end
		}
	}
}

// A logGap is damage inside the event log: lines between two valid events
// that fail their checksum. The events with ids prev+1 … next-1 were
// there; the messages and headers that name those ids restore them.
type logGap struct {
	seg        int64 // the segment
	start, end int64 // the damaged bytes [start, end), whole lines
	prev, next int64 // the ids of the valid events around it (next 0: none)
	finding    int   // its finding's index in the report
}

func (li *logIndex) lastGap() *logGap {
	if len(li.gaps) == 0 {
		return nil
	}
	return li.gaps[len(li.gaps)-1]
}

// inGap reports whether event id was in damaged bytes inside the log: it
// is there, unreadable until restored, not missing.
func (li *logIndex) inGap(id int64) bool {
	for _, g := range li.gaps {
		if g.next != 0 && id > g.prev && id < g.next {
			return true
		}
	}
	return false
}

// restoreGaps rewrites the damaged lines inside the log as the events they
// held, each under its own id: the event a header names as its last (as
// it was), else one rebuilt from the message that names the id, else a
// placeholder saying the event was lost. The damaged bytes are kept in a
// .bad file. When the new lines fit in the damaged bytes they are padded
// to the same length, so that no position past them moves; otherwise
// what follows moves, and the headers that point past the damage move
// with it. A header whose own event was restored points where its new
// line ends. The caller holds every lock.
func (s *Store) restoreGaps(li *logIndex, r *inbox.FsckReport, headers map[string]*header, byEvent map[int64]*inbox.Message) error {
	bySeg := map[int64][]*logGap{}
	var segs []int64
	for _, g := range li.gaps {
		if g.next == 0 {
			continue // damage at the very end: nothing after it to restore
		}
		if bySeg[g.seg] == nil {
			segs = append(segs, g.seg)
		}
		bySeg[g.seg] = append(bySeg[g.seg], g)
	}
	lastEvent := map[int64]*inbox.Event{}
	for _, h := range headers {
		if h.LastEvent != nil {
			lastEvent[h.LastEventID] = h.LastEvent
		}
	}
	for _, seg := range segs {
		shifts, restored, err := s.rewriteSegment(seg, bySeg[seg], r, lastEvent, li, byEvent)
		if err != nil {
			return err
		}
		for tid, h := range headers {
			moved, ok := restored[h.LastEventID]
			if !ok && h.LogPos.Segment == seg {
				// Headers that point past a change of length move
				// with it.
				moved = h.LogPos
				for _, sh := range shifts {
					if h.LogPos.Offset > sh.at {
						moved.Offset += sh.by
					}
				}
			}
			if (ok || h.LogPos.Segment == seg) && moved != h.LogPos {
				n := h.clone()
				n.LogPos = moved
				if _, err := s.appendHeader(s.threadDir(tid), n, nil, true); err != nil {
					return err
				}
				headers[tid] = n
			}
		}
	}
	return nil
}

// A shift is where a segment's rewrite changed the length of its bytes,
// and by how much.
type shift struct{ at, by int64 }

// rewriteSegment rewrites segment seg with its damaged bytes gaps
// replaced by the events they held (see restoreGaps), streaming it: the
// segment, which may hold lines of hundreds of MiB, is copied a piece at
// a time into its new file, never held, and the padding of a long damaged
// line is written the same way. The damaged bytes go to a .bad file. It
// returns where lengths changed and where each restored event's line ends
// in the new file.
func (s *Store) rewriteSegment(seg int64, gaps []*logGap, r *inbox.FsckReport, lastEvent map[int64]*inbox.Event, li *logIndex, byEvent map[int64]*inbox.Message) ([]shift, map[int64]Pos, error) {
	p := s.log.segPath(seg)
	src, err := openRead(p)
	if err != nil {
		return nil, nil, inbox.Storage(err, "read %s", p)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return nil, nil, inbox.Storage(err, "read %s", p)
	}
	var shifts []shift
	restored := map[int64]Pos{}
	err = s.publishFrom(p, func(w io.Writer) error {
		pos, written := int64(0), int64(0) // read from the old file, written to the new one
		for _, g := range gaps {
			bad := filepath.Join(s.log.dir, fmt.Sprintf("%020d.damaged-%d.bad", seg, g.start))
			if err := s.publishFrom(bad, func(bw io.Writer) error {
				_, err := io.Copy(bw, io.NewSectionReader(src, g.start, g.end-g.start))
				return err
			}); err != nil {
				return err
			}
			var lines [][]byte
			for id := g.prev + 1; id < g.next; id++ {
				lines = append(lines, encodeEvent(&logEvent{Event: *s.lostEvent(id, lastEvent, byEvent, filepath.Base(bad))}))
			}
			if _, err := io.Copy(w, io.NewSectionReader(src, pos, g.start-pos)); err != nil {
				return err
			}
			written += g.start - pos
			ends, err := writePadded(w, lines, g.end-g.start)
			if err != nil {
				return err
			}
			for i, end := range ends {
				restored[g.prev+1+int64(i)] = Pos{Segment: seg, Offset: written + end}
			}
			var n int64 // nothing when no event was hidden there
			if len(ends) > 0 {
				n = ends[len(ends)-1]
			}
			written += n
			if d := n - (g.end - g.start); d != 0 {
				shifts = append(shifts, shift{at: g.start, by: d})
			}
			pos = g.end
			f := &r.Findings[g.finding]
			f.Detail += fmt.Sprintf("; events %d to %d restored under their ids (the damaged bytes are in %s)", g.prev+1, g.next-1, filepath.Base(bad))
			f.Repaired = true
			for id := g.prev + 1; id < g.next; id++ {
				if m := byEvent[id]; m != nil {
					li.msgs[m.MessageID] = id
					li.ids[id] = m.ThreadID
				}
			}
		}
		_, err := io.Copy(w, io.NewSectionReader(src, pos, fi.Size()-pos))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return shifts, restored, syncDir(s.log.dir)
}

// publishFrom writes the file at path as publishFile does (a temp file,
// fsynced, renamed into place), with what write writes to it.
func (s *Store) publishFrom(path string, write func(w io.Writer) error) error {
	flushes.Add(1) // renameio fsyncs the file
	pf, err := renameio.NewPendingFile(path, renameio.WithTempDir(s.tmpDir()), renameio.WithStaticPermissions(s.fileMode))
	if err != nil {
		return inbox.Storage(err, "write %s", path)
	}
	defer pf.Cleanup()
	if err := write(pf); err != nil {
		var ie *inbox.Error
		if errors.As(err, &ie) {
			return err
		}
		return inbox.Storage(err, "write %s", path)
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return inbox.Storage(err, "write %s", path)
	}
	return nil
}

// lostEvent rebuilds event id for restoreGaps.
func (s *Store) lostEvent(id int64, lastEvent map[int64]*inbox.Event, byEvent map[int64]*inbox.Message, bad string) *inbox.Event {
	if ev := lastEvent[id]; ev != nil {
		e := *ev
		e.EventID = id
		return &e
	}
	if m := byEvent[id]; m != nil {
		ev := &inbox.Event{EventID: id, ThreadID: m.ThreadID, Source: "fsck", MessageID: m.MessageID, Summary: inbox.Shorten(m.Summary, maxEventSumLen),
			PayloadJSON: json.RawMessage(`{"restored":true}`), CreatedAt: m.CreatedAt, Agent: m.FromAgent, Kind: m.Kind, Status: m.Status}
		switch {
		case m.Seq == 1:
			ev.EventType = inbox.EventThreadCreated
		case m.Status == inbox.StatusDone:
			ev.EventType = inbox.EventThreadDone
		case m.Status == inbox.StatusFailed:
			ev.EventType = inbox.EventThreadFailed
		case m.Status == inbox.StatusCancelled:
			ev.EventType = inbox.EventThreadCancelled
		case m.Status != "":
			ev.EventType = inbox.EventThreadUpdated
		default:
			ev.EventType = inbox.EventMessageAdded
		}
		return ev
	}
	return &inbox.Event{EventID: id, Source: "fsck", EventType: inbox.EventLost, PayloadJSON: json.RawMessage("{}"), CreatedAt: inbox.FormatTime(s.now()),
		Summary: fmt.Sprintf("event %d was damaged in the log and nothing else records it (the bytes are in %s)", id, bad)}
}

// writePadded writes lines and, when they are shorter than n bytes, pads
// the last one with spaces inside its JSON (before the checksum, which
// covers them) to exactly n bytes, writing the padding a piece at a time:
// a damaged line of hundreds of MiB is restored as a short event padded
// to its length without that length being held. It returns where each
// line ends, from the start of the first.
func writePadded(w io.Writer, lines [][]byte, n int64) ([]int64, error) {
	if len(lines) == 0 {
		return nil, nil
	}
	ends := make([]int64, len(lines))
	var total int64
	for i, l := range lines {
		total += int64(len(l))
		ends[i] = total
	}
	last := lines[len(lines)-1]
	pad := n - total
	if pad <= 0 {
		for _, l := range lines {
			if _, err := w.Write(l); err != nil {
				return nil, err
			}
		}
		return ends, nil
	}
	for _, l := range lines[:len(lines)-1] {
		if _, err := w.Write(l); err != nil {
			return nil, err
		}
	}
	// The last line's JSON without its closing brace, the spaces, the
	// brace, then the checksum of all three as sealLine writes it.
	body, _ := checkLine(last[:len(last)-1])
	head := body[:len(body)-1]
	if _, err := w.Write(head); err != nil {
		return nil, err
	}
	sum := crc32.ChecksumIEEE(head)
	spaces := bytes.Repeat([]byte(" "), int(min(pad, 64<<10)))
	for left := pad; left > 0; {
		k := min(left, int64(len(spaces)))
		if _, err := w.Write(spaces[:k]); err != nil {
			return nil, err
		}
		sum = crc32.Update(sum, crc32.IEEETable, spaces[:k])
		left -= k
	}
	sum = crc32.Update(sum, crc32.IEEETable, []byte("}"))
	if _, err := fmt.Fprintf(w, `,"crc":"%08x"}`+"\n", sum); err != nil {
		return nil, err
	}
	ends[len(ends)-1] = n
	return ends, nil
}
