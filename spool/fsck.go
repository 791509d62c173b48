package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"crypto/sha256"
	"encoding/hex"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/index"
)

// Fsck checks every invariant of SPEC §8 that the files can show: the
// event log's lines, checksums and ids; each thread's header against its
// messages, events, lease file and index markers; stray temp files and
// stale records. With repair it fixes what a crash can leave half-done,
// holding every lock of the store while it does.
func (s *Store) Fsck(repair bool) (*inbox.FsckReport, error) {
	if repair {
		// The locks themselves must not be taken through a link.
		if p := s.lockFile(""); refuseLink(filepath.Clean(p)) != nil {
			os.Remove(filepath.Clean(p))
			os.Mkdir(filepath.Clean(p), s.dirMode)
		}
		unlock, err := s.lockAll()
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	return s.fsck(repair)
}

// fsck is Fsck; with repair, the caller holds every lock of the store.
func (s *Store) fsck(repair bool) (*inbox.FsckReport, error) {
	r := &inbox.FsckReport{Findings: []inbox.Finding{}}
	add := func(f inbox.Finding) *inbox.Finding {
		r.Findings = append(r.Findings, f)
		return &r.Findings[len(r.Findings)-1]
	}

	// 0. Symbolic links, which inbox never makes: first, so that a repair
	// writes nothing through one.
	s.fsckSymlinks(add, repair)
	if repair {
		for _, d := range []string{tmpDirName, threadsDir, eventsDir, locksDir, idemDir} {
			if err := os.Mkdir(filepath.Join(s.dir, d), s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, inbox.Storage(err, "create %s", d)
			}
		}
		s.linkErr = s.checkNoLinks()
	}

	// 1. The event log.
	if segs, _ := os.ReadDir(s.log.dir); !slices.ContainsFunc(segs, func(e os.DirEntry) bool {
		return strings.HasSuffix(e.Name(), segSuffix)
	}) {
		f := add(inbox.Finding{Check: "missing_event_log", Path: s.log.dir, Detail: "the event log has no segment"})
		if !repair {
			return r, nil // nothing else can be checked against the log
		}
		if err := s.restartLog(); err != nil {
			return nil, err
		}
		f.Detail += "; started a new one after the highest event id the threads name"
		f.Repaired = true
	}
	events, err := s.fsckLog(r, add, repair)
	if err != nil {
		return nil, err
	}

	// 2. Temp files: with the store locked, nothing is being written.
	if repair {
		entries, _ := os.ReadDir(s.tmpDir())
		for _, e := range entries {
			p := filepath.Join(s.tmpDir(), e.Name())
			f := add(inbox.Finding{Check: "stray_temp_file", Path: p, Detail: "left by an interrupted write"})
			f.Repaired = os.RemoveAll(p) == nil
		}
	} else if entries, _ := os.ReadDir(s.tmpDir()); len(entries) > 0 {
		for _, e := range entries {
			add(inbox.Finding{Check: "stray_temp_file", Path: filepath.Join(s.tmpDir(), e.Name()),
				Detail: "left by an interrupted write, or a write in progress"})
		}
	}

	// 3. Threads.
	tids, err := s.threadIDs()
	if err != nil {
		return nil, err
	}
	headers := map[string]*header{}
	byEvent := map[int64]*inbox.Message{} // every message, by the id of its event
	for _, tid := range tids {
		h, err := s.fsckThread(tid, events, byEvent, add, repair)
		if err != nil {
			return nil, err
		}
		if h != nil {
			headers[tid] = h
			r.Threads++
			r.Messages += h.MessageCount
		}
	}
	// Damage inside the event log, now that the messages and headers that
	// name the events it hid are known.
	if repair && len(events.gaps) > 0 {
		if err := s.restoreGaps(events, r, headers, byEvent); err != nil {
			return nil, err
		}
	}

	// 4. The index against the headers: rebuilt from nothing when it is
	// not whole (readers refuse it until then).
	if err := s.idx.Check(); err != nil {
		f := add(inbox.Finding{Check: "missing_index", Path: filepath.Join(s.dir, indexDirName),
			Detail: strings.TrimPrefix(err.Error(), index.ErrMissing.Error()+": ") + "; fetch and list refuse to answer until it is rebuilt"})
		if repair {
			if _, err := s.rebuildIndex(); err != nil {
				return nil, err
			}
			f.Detail += "; rebuilt from the thread headers"
			f.Repaired = true
		}
	}
	if err := s.fsckIndex(headers, add, repair); err != nil {
		return nil, err
	}

	// 5. Idempotency links of thread-creating sends.
	entries, _ := os.ReadDir(filepath.Join(s.dir, idemDir))
	for _, e := range entries {
		p := filepath.Join(s.dir, idemDir, e.Name())
		data, err := readFile(p)
		var m msgFile
		if err == nil && m.decodeJSON(data) == nil && m.ThreadID != "" &&
			(headers[m.ThreadID] != nil || exists(s.archivedDir(m.ThreadID))) {
			continue
		}
		f := add(inbox.Finding{Check: "stale_idempotency_record", Path: p, Detail: "names no committed thread"})
		if repair {
			f.Repaired = os.Remove(p) == nil
		}
	}
	// 6. Mailbox entries and task names that no committed message backs;
	// acknowledgments owed; teams against the log.
	s.fsckLinks(add, repair)
	s.fsckAcks(headers, byEvent, add, repair)
	if err := s.fsckTeams(add, repair); err != nil {
		return nil, err
	}
	// 7. Blobs against the messages that name them.
	if err := s.fsckBlobs(events.blobs, add, repair); err != nil {
		return nil, err
	}
	r.Events = len(events.ids)
	return r, nil
}

// fsckLinks finds mailbox entries and task registrations left by commits
// that never happened.
func (s *Store) fsckLinks(add func(inbox.Finding) *inbox.Finding, repair bool) {
	owners, _ := os.ReadDir(filepath.Join(s.dir, mailboxDir))
	for _, o := range owners {
		dir := s.mailboxPath(o.Name())
		names, _ := os.ReadDir(dir)
		for _, n := range names {
			_, _, tid, seq, ok := parseMarker(n.Name())
			if !ok {
				continue // .collected and anything else
			}
			p := filepath.Join(dir, n.Name())
			h, err := s.readHeader(tid)
			if err == nil && seq <= h.MessageCount && sameFile(p, filepath.Join(s.threadDir(tid), msgName(seq))) {
				continue
			}
			if err != nil && exists(s.archivedDir(tid)) {
				continue
			}
			f := add(inbox.Finding{Check: "stale_mailbox_entry", Path: p, Detail: "names a message that was never committed"})
			if repair {
				f.Repaired = os.Remove(p) == nil
			}
		}
	}
	tasks, _ := os.ReadDir(filepath.Join(s.dir, tasksDir))
	for _, e := range tasks {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if _, err := s.TaskByName(name); !errors.Is(err, inbox.ErrNotFound) {
			continue
		}
		p := filepath.Join(s.dir, tasksDir, e.Name())
		f := add(inbox.Finding{Check: "stale_task", Path: p, Detail: "a task name whose push never committed"})
		if repair {
			f.Repaired = os.Remove(p) == nil
		}
	}
}

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
	first  int64               // the first id of the oldest segment still in the log
	blobs  map[string]blobMeta // blob path → what a message says of it
	gaps   []*logGap           // damage inside the log
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

func (s *Store) fsckLog(r *inbox.FsckReport, add func(inbox.Finding) *inbox.Finding, repair bool) (*logIndex, error) {
	li := &logIndex{ids: map[int64]string{}, msgs: map[string]int64{}, adds: map[string]*inbox.Event{},
		addAt: map[string]Pos{}, reads: map[string]map[string]*inbox.Cursor{}, newest: map[string]*logEvent{}, blobs: map[string]blobMeta{}}
	segs, err := s.log.segments()
	if err != nil {
		return nil, err
	}
	li.first = segs[0]
	var last int64
	for i, first := range segs {
		p := s.log.segPath(first)
		// Streamed a line at a time: a segment holding a large message
		// is never read into memory whole.
		sf, err := openRead(p)
		if err != nil {
			return nil, inbox.Storage(err, "read %s", p)
		}
		fi, err := sf.Stat()
		if err != nil {
			sf.Close()
			return nil, inbox.Storage(err, "read %s", p)
		}
		size := fi.Size()
		lr := newLineReader(sf)
		var off int64
		for {
			line, err := lr.next()
			if err != nil && !errors.Is(err, io.EOF) {
				sf.Close()
				return nil, inbox.Storage(err, "read %s", p)
			}
			if err != nil && lr.end == lr.beg {
				break
			}
			if err != nil {
				f := add(inbox.Finding{Check: "torn_event_log", Path: p,
					Detail: fmt.Sprintf("%d bytes after the last complete line (a crash mid-append)", lr.end-lr.beg)})
				if repair && i == len(segs)-1 {
					a, err := s.log.reserve() // cuts the torn tail, keeping a copy
					if err != nil {
						sf.Close()
						return nil, err
					}
					a.release()
					f.Repaired = true
				}
				break
			}
			start := off
			off += int64(len(line)) + 1
			body, ok := checkLine(line)
			// The line's head only: the message it carries is read again
			// from where the line ends when a file must be rebuilt from
			// it (messageFromLog), never held for the whole log.
			var head logHead
			if ok {
				if err := head.decodeJSON(body); err != nil {
					ok = false
				}
			}
			ev := logEvent{Event: head.Event, State: head.State}
			if !ok {
				if repair && i == len(segs)-1 && off >= size {
					// The log's last line: what a power cut leaves of an
					// append it never acknowledged. Cut it, keeping a copy.
					f := add(inbox.Finding{Check: "corrupt_event_log", Path: p,
						Detail: fmt.Sprintf("the last line, at byte %d, fails its checksum", start)})
					a, err := s.log.reserve()
					if err != nil {
						return nil, err
					}
					a.release()
					f.Repaired = true
					continue
				}
				// Damage inside the log: the events it hid are restored
				// under their own ids once the threads are read (restoreGaps).
				if g := li.lastGap(); g != nil && g.seg == first && g.end == start && g.next == 0 {
					g.end = off // the next bad line of the same damage
				} else {
					li.gaps = append(li.gaps, &logGap{seg: first, start: start, end: off, prev: last})
				}
				continue
			}
			if g := li.lastGap(); g != nil && g.next == 0 {
				g.next = ev.EventID
			}
			if ev.EventID <= last {
				add(inbox.Finding{Check: "event_order", Path: p,
					Detail: fmt.Sprintf("event %d follows event %d", ev.EventID, last)})
			}
			last = ev.EventID
			li.ids[ev.EventID] = ev.ThreadID
			if ev.MessageID != "" && ev.EventType != inbox.EventThreadRead {
				li.msgs[ev.MessageID] = ev.EventID
			}
			if ev.EventType == inbox.EventThreadRead {
				li.noteRead(&ev.Event)
			}
			if ev.State != nil {
				e := ev
				li.newest[ev.ThreadID] = &e
				if ev.MessageID != "" && ev.EventType != inbox.EventThreadRead {
					a := ev.Event
					k := addKey(ev.ThreadID, ev.State.MessageCount)
					li.adds[k] = &a
					li.addAt[k] = Pos{Segment: first, Offset: off}
				}
			}
		}
		sf.Close()
	}
	for _, g := range li.gaps {
		f := add(inbox.Finding{Check: "corrupt_event_log", Path: s.log.segPath(g.seg),
			Detail: fmt.Sprintf("bytes %d to %d fail their checksum; readers skip them", g.start, g.end)})
		g.finding = len(r.Findings) - 1
		if g.next == 0 && repair {
			// At the very end: what a power cut leaves of appends never
			// acknowledged. The next writer would cut it; so does repair,
			// keeping a copy.
			a, err := s.log.reserve()
			if err != nil {
				return nil, err
			}
			a.release()
			f.Detail += "; cut (the end of the log), a copy kept"
			f.Repaired = true
		}
	}
	return li, nil
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
// to the same length, so that no position in the log moves; otherwise the
// segment is rewritten and the headers that point past the damage are
// moved with it. The caller holds every lock.
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
		p := s.log.segPath(seg)
		data, err := readFile(p)
		if err != nil {
			return inbox.Storage(err, "read %s", p)
		}
		var out []byte
		type shift struct{ at, by int64 }
		var shifts []shift
		pos := int64(0)
		for _, g := range bySeg[seg] {
			bad := filepath.Join(s.log.dir, fmt.Sprintf("%020d.damaged-%d.bad", seg, g.start))
			if err := publishFile(bad, s.tmpDir(), s.fileMode, data[g.start:g.end]); err != nil {
				return err
			}
			var lines [][]byte
			for id := g.prev + 1; id < g.next; id++ {
				lines = append(lines, encodeEvent(&logEvent{Event: *s.lostEvent(id, lastEvent, byEvent, filepath.Base(bad))}))
			}
			repl := padLines(lines, int(g.end-g.start))
			out = append(out, data[pos:g.start]...)
			out = append(out, repl...)
			if d := int64(len(repl)) - (g.end - g.start); d != 0 {
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
		out = append(out, data[pos:]...)
		if err := publishFile(p, s.tmpDir(), s.fileMode, out); err != nil {
			return err
		}
		if err := syncDir(s.log.dir); err != nil {
			return err
		}
		// Headers that point past a change of length move with it.
		for tid, h := range headers {
			if h.LogPos.Segment != seg {
				continue
			}
			moved := h.LogPos.Offset
			for _, sh := range shifts {
				if h.LogPos.Offset > sh.at {
					moved += sh.by
				}
			}
			if moved != h.LogPos.Offset {
				n := h.clone()
				n.LogPos.Offset = moved
				if _, err := s.appendHeader(s.threadDir(tid), n, nil, true); err != nil {
					return err
				}
				headers[tid] = n
			}
		}
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

// padLines joins lines and, when they are shorter than n bytes, pads the
// last one with spaces inside its JSON (before the checksum, which covers
// them) to exactly n bytes.
func padLines(lines [][]byte, n int) []byte {
	var out []byte
	for _, l := range lines {
		out = append(out, l...)
	}
	if len(out) >= n || len(lines) == 0 {
		return out
	}
	last := lines[len(lines)-1]
	body, _ := checkLine(last[:len(last)-1])
	pad := n - len(out)
	padded := append(append(append([]byte{}, body[:len(body)-1]...), bytes.Repeat([]byte(" "), pad)...), '}')
	out = out[:len(out)-len(last)]
	return append(out, encodeLine(padded)...)
}

// threadIDs lists the thread directories.
func (s *Store) threadIDs() ([]string, error) {
	return names(s.threadsRoot(), "threads")
}

// messageSeqs lists the seq numbers of a thread's message files.
func messageSeqs(dir string) ([]int, []string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var seqs []int
	var temps []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			temps = append(temps, n)
			continue
		}
		if strings.HasPrefix(n, "m-") && strings.HasSuffix(n, ".json") {
			if seq, err := strconv.Atoi(n[2 : len(n)-5]); err == nil {
				seqs = append(seqs, seq)
			}
		}
	}
	slices.Sort(seqs)
	return seqs, temps, nil
}

func (s *Store) fsckThread(tid string, li *logIndex, byEvent map[int64]*inbox.Message, add func(inbox.Finding) *inbox.Finding, repair bool) (*header, error) {
	dir := s.threadDir(tid)
	seqs, temps, err := messageSeqs(dir)
	if err != nil {
		return nil, inbox.Storage(err, "list thread %s", tid)
	}
	for _, n := range temps {
		f := add(inbox.Finding{Check: "stray_temp_file", ThreadID: tid, Path: filepath.Join(dir, n), Detail: "left by an interrupted write"})
		if repair {
			f.Repaired = os.Remove(filepath.Join(dir, n)) == nil
		}
	}
	if err := s.fsckHeaderLog(tid, li, add, repair); err != nil {
		return nil, err
	}
	h, err := s.readHeader(tid)
	if errors.Is(err, inbox.ErrNotFound) {
		// Created but never committed — unless the log says it was.
		f := add(inbox.Finding{Check: "incomplete_thread", ThreadID: tid, Path: dir, Detail: "a thread directory with no committed header"})
		if !repair {
			return nil, nil
		}
		if ev := li.newest[tid]; ev != nil && ev.State != nil {
			st := ev.State
			last := ev.Event
			st.LastEventID, st.LastEvent = ev.EventID, &last
			if _, err := s.appendHeader(dir, st, nil, true); err != nil {
				return nil, err
			}
			f.Detail += "; rebuilt from its last event"
			f.Repaired = true
			h = st
		} else {
			f.Detail += "; removed"
			f.Repaired = os.RemoveAll(dir) == nil
			return nil, nil
		}
	} else if err != nil {
		add(inbox.Finding{Check: "unreadable_thread", ThreadID: tid, Path: dir, Detail: err.Error()})
		return nil, nil
	}

	// Messages against the header.
	want := h.MessageCount
	var extra []int
	for i, seq := range seqs {
		if seq > want {
			extra = append(extra, seqs[i:]...)
			break
		}
	}
	for seq := 1; seq <= want; seq++ {
		if !slices.Contains(seqs, seq) {
			f := add(inbox.Finding{Check: "missing_message", ThreadID: tid, Path: filepath.Join(dir, msgName(seq)),
				Detail: fmt.Sprintf("the header counts %d messages but #%d is missing", want, seq)})
			if repair {
				ok, err := s.rebuildMessage(tid, seq, h, li)
				if err != nil {
					return nil, err
				}
				if ok {
					f.Detail += "; rebuilt whole from the event log line that carries it"
					f.Repaired = true
				}
			}
		}
	}
	ownEvent := li.hasOwnEvent(h)
	if len(extra) > 0 || !ownEvent {
		if len(extra) > 0 {
			add(inbox.Finding{Check: "orphan_message", ThreadID: tid, Detail: fmt.Sprintf(
				"message files %v past message_count %d: an uncommitted write, or a header behind its log", extra, want), Repaired: repair})
		}
		if !ownEvent {
			add(inbox.Finding{Check: "missing_event", ThreadID: tid, Detail: fmt.Sprintf(
				"the header's event %d is not in the log", h.LastEventID), Repaired: repair})
		}
		if repair {
			if h, err = s.settle(tid, h, ownEvent); err != nil {
				return nil, err
			}
			// settle appended the header's event if it was missing: its
			// message has its event now.
			if h.LastEvent != nil && h.LastEvent.MessageID != "" {
				li.msgs[h.LastEvent.MessageID] = h.LastEventID
			}
			li.ids[h.LastEventID] = tid
		}
	}
	// Each message has its event.
	for seq := 1; seq <= h.MessageCount; seq++ {
		m, err := s.readMessage(tid, seq)
		if isDamaged(err) {
			p := filepath.Join(dir, msgName(seq))
			f := add(inbox.Finding{Check: "damaged_message", ThreadID: tid, Path: p,
				Detail: "not valid JSON; the other messages stay readable"})
			if !repair {
				continue
			}
			bad, aerr := setAside(p)
			if aerr != nil {
				return nil, aerr
			}
			ok, rerr := s.rebuildMessage(tid, seq, h, li)
			if rerr != nil {
				return nil, rerr
			}
			if ok {
				f.Detail += "; set aside as " + filepath.Base(bad) + " and rebuilt whole from the event log line that carries it"
				m, err = s.readMessage(tid, seq)
			} else {
				if m, err = s.replaceDamaged(tid, seq, h, li, bad); err != nil {
					return nil, err
				}
				f.Detail += "; set aside as " + filepath.Base(bad) + " and replaced by what the event log knows of it (its body is lost: the log line that carried it is gone)"
			}
			f.Repaired = true
		}
		if err != nil {
			if !errors.Is(err, inbox.ErrNotFound) {
				add(inbox.Finding{Check: "unreadable_thread", ThreadID: tid, Path: filepath.Join(dir, msgName(seq)), Detail: err.Error()})
			}
			continue
		}
		for _, bm := range blobRefs(m) {
			li.blobs[bm.Blob] = bm
		}
		if seq == h.MessageCount && m.MessageID != h.LatestMessageID {
			add(inbox.Finding{Check: "stale_header", ThreadID: tid, Detail: fmt.Sprintf(
				"latest_message_id %s but message #%d is %s", h.LatestMessageID, seq, m.MessageID)})
		}
		// Kept for the whole check: what restoring the log and checking
		// acknowledgments read, not the body or a large payload.
		slim := *m
		slim.Body, slim.Extra = "", nil
		if slim.Type != inbox.TypeAcknowledgment {
			slim.PayloadJSON = nil
		}
		byEvent[m.EventID] = &slim
		if _, ok := li.msgs[m.MessageID]; !ok && m.EventID >= li.first && !li.inGap(m.EventID) {
			f := add(inbox.Finding{Check: "missing_event", ThreadID: tid, Path: filepath.Join(dir, msgName(seq)),
				Detail: fmt.Sprintf("message %s has no event in the log", m.MessageID)})
			if repair {
				ev := inbox.Event{RunID: h.RunID, TaskID: h.TaskID, ThreadID: tid, Source: "fsck", EventType: inbox.EventMessageAdded,
					MessageID: m.MessageID, Summary: inbox.Shorten(m.Summary, maxEventSumLen), PayloadJSON: json.RawMessage(`{"repaired":true}`),
					CreatedAt: inbox.FormatTime(s.now()), Agent: m.FromAgent, Kind: m.Kind, Status: h.Status}
				if _, _, err := s.log.append(&logEvent{Event: ev}); err != nil {
					return nil, err
				}
				f.Repaired = true
			}
		}
	}
	// Read cursors against the log: a mark-read commits its event first,
	// so a cursor behind its newest logged move lost its line (a failure
	// or a kill between the two); repair writes it.
	for agent, c := range li.reads[tid] {
		cur, err := s.readCursor(tid, agent)
		if err != nil || (cur != nil && cur.LastReadSeq >= c.LastReadSeq) || c.LastReadSeq > h.MessageCount {
			continue
		}
		have := 0
		if cur != nil {
			have = cur.LastReadSeq
		}
		f := add(inbox.Finding{Check: "cursor_behind_log", ThreadID: tid, Path: filepath.Join(dir, cursorName(agent)),
			Detail: fmt.Sprintf("%s's read cursor is at #%d, but the log records a mark-read up to #%d", agent, have, c.LastReadSeq)})
		if repair {
			_, _, err := s.appendLine(filepath.Join(dir, cursorName(agent)), encodeLine(c.AppendJSON(nil)), maxCursorLog, true)
			f.Repaired = err == nil
		}
	}
	// The lease file against the header (one planted in its place is
	// already reported, and set aside on repair).
	l, err := s.readLeaseFile(tid)
	if errors.Is(err, inbox.ErrFormat) && !repair {
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	bad := ""
	switch {
	case l == nil && h.LeaseRev != 0:
		bad = "lease.json is missing"
	case l != nil && l.Rev == -1:
		bad = "lease.json is torn or not valid"
	case l != nil && h.LeaseRev == 0:
		bad = "lease.json exists but no lease was ever committed"
	case l != nil && h.Lease != nil && (l.Rev != h.LeaseRev || l.AgentID != h.Lease.AgentID ||
		l.LeaseToken != h.Lease.LeaseToken || l.ExpiresAt != h.Lease.ExpiresAt || l.Released() != h.Lease.Released() ||
		l.Released() && *l.ReleasedAt != *h.Lease.ReleasedAt):
		bad = "lease.json disagrees with the thread header"
	}
	if bad != "" {
		f := add(inbox.Finding{Check: "bad_lease", ThreadID: tid, Path: filepath.Join(dir, leaseFile), Detail: bad})
		if repair {
			if h.Lease != nil {
				_, err = s.writeLeaseFile(dir, &leaseRecord{Lease: *h.Lease, Rev: h.LeaseRev})
			} else {
				err = os.Remove(filepath.Join(dir, leaseFile))
			}
			f.Repaired = err == nil
		}
	}
	return h, nil
}

func (s *Store) fsckIndex(headers map[string]*header, add func(inbox.Finding) *inbox.Finding, repair bool) error {
	for tid, h := range headers {
		e := entryOf(h)
		for _, p := range s.idx.Paths(e) {
			if exists(p) {
				continue
			}
			f := add(inbox.Finding{Check: "missing_index", ThreadID: tid, Path: p, Detail: "the index does not list the thread under its status and assignee"})
			if repair {
				_, err := s.idx.Add(e, filepath.Join(s.threadDir(tid), msgName(1)))
				f.Repaired = err == nil
			}
		}
	}
	return s.idx.Walk(func(e index.Entry, path string) {
		h := headers[e.ThreadID]
		if h != nil && slices.Contains(s.idx.Paths(entryOf(h)), path) {
			return
		}
		agrees := h != nil && h.Status == e.Status && h.Priority == e.Priority && (e.AssignedTo == "" || entryOf(h).AssignedTo == e.AssignedTo)
		detail := "the thread does not exist"
		switch {
		case agrees:
			detail = "it lies outside the directory its thread id and status name"
		case h != nil:
			detail = fmt.Sprintf("the thread is %s, assigned to %s", h.Status, h.AssignedTo)
		}
		f := add(inbox.Finding{Check: "stale_index", ThreadID: e.ThreadID, Path: path, Detail: "a marker for " + e.Status + ", but " + detail})
		if repair {
			f.Repaired = s.idx.RemoveMarker(e, path) == nil
		}
	})
}

// fsckBlobs checks blobs/ against the blobs the messages name (live and
// archived): a named blob must be there, whole (its size and SHA-256); a
// blob nothing names was left by a change that never committed (a crash
// between linking it and the commit point) and is removed on repair.
// With repair every lock is held, so no change is between the two.
func (s *Store) fsckBlobs(named map[string]blobMeta, add func(inbox.Finding) *inbox.Finding, repair bool) error {
	arch := filepath.Join(s.dir, archiveDir, threadsDir)
	if tids, err := os.ReadDir(arch); err == nil {
		for _, e := range tids {
			dir := filepath.Join(arch, e.Name())
			h, err := s.readHeaderAt(dir, e.Name())
			if err != nil {
				continue
			}
			for seq := 1; seq <= h.MessageCount; seq++ {
				if m, err := s.readMessageAt(dir, e.Name(), seq); err == nil {
					for _, bm := range blobRefs(m) {
						named[bm.Blob] = bm
					}
				}
			}
		}
	}
	dir := filepath.Join(s.dir, blobsDir)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return inbox.Storage(err, "list blobs")
	}
	present := map[string]bool{}
	for _, e := range entries {
		rel := blobsDir + "/" + e.Name()
		p := filepath.Join(dir, e.Name())
		bm, ok := named[rel]
		if !ok {
			f := add(inbox.Finding{Check: "orphan_blob", Path: p, Detail: "a blob no message names (left by a change that never committed)"})
			if repair {
				f.Repaired = os.Remove(p) == nil
			}
			continue
		}
		present[rel] = true
		if why := checkBlob(p, bm); why != "" {
			add(inbox.Finding{Check: "damaged_blob", Path: p, Detail: why})
		}
	}
	for rel, bm := range named {
		if !present[rel] {
			add(inbox.Finding{Check: "missing_blob", Path: filepath.Join(s.dir, filepath.FromSlash(rel)),
				Detail: fmt.Sprintf("a message names %s, which is not in the store", bm)})
		}
	}
	return nil
}

// checkBlob says what is wrong with the blob file at p, if anything.
func checkBlob(p string, bm blobMeta) string {
	f, err := openRead(p)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	d := sha256.New()
	n, err := io.Copy(d, f)
	switch {
	case err != nil:
		return err.Error()
	case n != bm.Bytes:
		return fmt.Sprintf("%d bytes, but its message says %d", n, bm.Bytes)
	case hex.EncodeToString(d.Sum(nil)) != bm.SHA256 || filepath.Base(p) != bm.SHA256:
		return fmt.Sprintf("its content's SHA-256 is %s, not the %s its name and message say", hex.EncodeToString(d.Sum(nil)), bm.SHA256)
	}
	return ""
}

func addKey(tid string, seq int) string { return tid + "#" + strconv.Itoa(seq) }

// replaceDamaged writes in the place of a damaged message file, set aside
// as bad, when the log line that carried the message is gone (archived
// segments, or a format 1 store) what the event log knows of the
// message: its id, event, sender, kind and summary, marked damaged. A
// thread whose header was in that file (its first message, before any
// change) gets the header the log holds in thread.log first. The caller
// holds every lock.
func (s *Store) replaceDamaged(tid string, seq int, h *header, li *logIndex, bad string) (*inbox.Message, error) {
	dir := s.threadDir(tid)
	if seq == 1 && !exists(filepath.Join(dir, headerLog)) {
		if _, err := s.appendHeader(dir, h, nil, true); err != nil {
			return nil, err
		}
	}
	p := filepath.Join(dir, msgName(seq))
	m := &inbox.Message{ThreadID: tid, Seq: seq, Kind: inbox.KindEvent, PayloadJSON: json.RawMessage("{}"), Damaged: true,
		Body: "the message's file was damaged; its bytes are kept in " + filepath.Base(bad)}
	if ev := li.adds[addKey(tid, seq)]; ev != nil {
		m.MessageID, m.FromAgent, m.Kind, m.Summary, m.CreatedAt, m.EventID = ev.MessageID, ev.Agent, ev.Kind, ev.Summary, ev.CreatedAt, ev.EventID
		switch ev.EventType {
		case inbox.EventThreadUpdated, inbox.EventThreadDone, inbox.EventThreadFailed, inbox.EventThreadCancelled:
			m.Status = ev.Status
		}
	}
	if m.MessageID == "" && seq == h.MessageCount {
		m.MessageID = h.LatestMessageID
	}
	if m.MessageID == "" {
		m.MessageID = inbox.NewID("msg_", s.now())
	}
	if m.Kind == "" {
		m.Kind = inbox.KindEvent
	}
	if m.Summary == "" {
		m.Summary = fmt.Sprintf("message #%d (damaged)", seq)
	}
	if m.CreatedAt == "" {
		m.CreatedAt = inbox.FormatTime(s.now())
	}
	mf := msgFile{Message: *m}
	if err := publishFile(p, s.tmpDir(), s.fileMode, mf.appendJSON(nil)); err != nil {
		return nil, err
	}
	return m, syncDir(dir)
}

// setAside renames the damaged file p to p.bad (p.N.bad when taken), so
// its bytes are kept, and returns the new name.
func setAside(p string) (string, error) {
	bad := p + ".bad"
	for i := 1; exists(bad); i++ {
		bad = fmt.Sprintf("%s.%d.bad", p, i)
	}
	if err := os.Rename(p, bad); err != nil {
		return "", inbox.Storage(err, "set aside %s", p)
	}
	return bad, nil
}

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

// rebuildMessage writes message seq of thread tid from the log line that
// carries it, as the change that added it wrote it (the first message
// with the thread's initial header). It reports false when the log no
// longer holds the line. The caller holds every lock.
func (s *Store) rebuildMessage(tid string, seq int, h *header, li *logIndex) (bool, error) {
	ev, end, err := s.messageFromLog(tid, seq, li)
	if err != nil || ev == nil {
		return false, err
	}
	dir := s.threadDir(tid)
	mf := *ev.Message
	if seq == 1 {
		if !exists(filepath.Join(dir, headerLog)) {
			// The header lived in this file: keep the current one in
			// thread.log before the file is rewritten.
			if _, err := s.appendHeader(dir, h, nil, true); err != nil {
				return false, err
			}
		}
		mf.InitialHeader = firstHeader(ev, end, h)
	}
	if err := publishFile(filepath.Join(dir, msgName(seq)), s.tmpDir(), s.fileMode, mf.appendJSON(nil)); err != nil {
		return false, err
	}
	return true, syncDir(dir)
}

// fsckHeaderLog checks that thread.log, when it holds anything, holds a
// valid header line. One that does not (garbled, every line failing its
// checksum) would have readers fall back on the thread's initial header,
// which is stale once the thread changed; repair sets it aside and
// writes the newest state the log holds for the thread.
func (s *Store) fsckHeaderLog(tid string, li *logIndex, add func(inbox.Finding) *inbox.Finding, repair bool) error {
	p := filepath.Join(s.threadDir(tid), headerLog)
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return nil // missing (a thread not changed since creation), or planted: fsckPlanted's
	}
	body, err := readLastLine(p)
	if err != nil || body != nil {
		return nil
	}
	f := add(inbox.Finding{Check: "damaged_header", ThreadID: tid, Path: p,
		Detail: "thread.log holds no valid header line"})
	ev := li.newest[tid]
	if ev == nil || ev.State == nil {
		f.Detail += "; the log holds no state of the thread to rebuild it from"
		return nil
	}
	if !repair {
		return nil
	}
	bad, err := setAside(p)
	if err != nil {
		return err
	}
	st := *ev.State
	last := ev.Event
	st.LastEventID, st.LastEvent = ev.EventID, &last
	if _, err := s.appendHeader(s.threadDir(tid), &st, nil, true); err != nil {
		return err
	}
	f.Detail += "; set aside as " + filepath.Base(bad) + " and rebuilt from the thread's newest logged state"
	f.Repaired = true
	return nil
}

// noteRead records a thread.read event as the newest cursor of its agent.
func (li *logIndex) noteRead(ev *inbox.Event) {
	var p struct {
		ID  string `json:"last_read_message_id"`
		Seq int    `json:"last_read_seq"`
	}
	if ev.Agent == "" || json.Unmarshal(ev.PayloadJSON, &p) != nil {
		return
	}
	byAgent := li.reads[ev.ThreadID]
	if byAgent == nil {
		byAgent = map[string]*inbox.Cursor{}
		li.reads[ev.ThreadID] = byAgent
	}
	if old := byAgent[ev.Agent]; old == nil || p.Seq > old.LastReadSeq {
		byAgent[ev.Agent] = &inbox.Cursor{ThreadID: ev.ThreadID, AgentID: ev.Agent, LastReadMessageID: p.ID,
			LastReadSeq: p.Seq, ReadAt: ev.CreatedAt}
	}
}
