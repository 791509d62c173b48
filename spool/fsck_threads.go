package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/inbox-dev/inbox"
)

// fsck's check of one thread: its header against its messages, its
// events in the log, its read cursors and its lease file, and the
// repairs that rebuild a missing or damaged message or header from the
// log line that carries it.

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

// fsckThread checks thread tid and returns its header (nil when it has
// none to check against: never committed, or unreadable).
func (s *Store) fsckThread(ctx context.Context, tid string, li *logIndex, byEvent map[int64]*inbox.Message, add addFinding, repair bool) (*header, error) {
	dir := s.threadDir(tid)
	seqs, temps, err := messageSeqs(dir)
	if err != nil {
		return nil, inbox.Storage(err, "list thread %s", tid)
	}
	for _, n := range temps {
		add.removable(inbox.Finding{Check: "stray_temp_file", ThreadID: tid, Path: filepath.Join(dir, n), Detail: "left by an interrupted write"}, repair)
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
		ev := li.newest[tid]
		if ev == nil || ev.State == nil {
			f.Detail += "; removed"
			f.Repaired = os.RemoveAll(dir) == nil
			return nil, nil
		}
		h = ev.stateAt(Pos{})
		if _, err := s.appendHeader(dir, h, nil, true); err != nil {
			return nil, err
		}
		f.Detail += "; rebuilt from its last event"
		f.Repaired = true
	} else if err != nil {
		add(inbox.Finding{Check: "unreadable_thread", ThreadID: tid, Path: dir, Detail: err.Error()})
		return nil, nil
	}
	if h, err = s.fsckMessageFiles(ctx, tid, h, seqs, li, add, repair); err != nil {
		return nil, err
	}
	if err := s.fsckMessages(ctx, tid, h, li, byEvent, add, repair); err != nil {
		return nil, err
	}
	s.fsckCursors(tid, h, li, add, repair)
	if err := s.fsckLease(tid, h, add, repair); err != nil {
		return nil, err
	}
	return h, nil
}

// fsckMessageFiles checks the thread's message files, seqs, against its
// header h: every message it counts is there (rebuilt from the log on
// repair), none past its count, and its last event is in the log; it
// settles the thread on repair and returns its header then.
func (s *Store) fsckMessageFiles(ctx context.Context, tid string, h *header, seqs []int, li *logIndex, add addFinding, repair bool) (*header, error) {
	dir := s.threadDir(tid)
	want := h.MessageCount
	var extra []int
	for i, seq := range seqs {
		if seq > want {
			extra = append(extra, seqs[i:]...)
			break
		}
	}
	for seq := 1; seq <= want; seq++ {
		if slices.Contains(seqs, seq) {
			continue
		}
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
	ownEvent := li.hasOwnEvent(h)
	if ownEvent {
		var err error
		if h, err = s.fsckLogPos(tid, h, li, add, repair); err != nil {
			return nil, err
		}
	}
	if len(extra) == 0 && ownEvent {
		return h, nil
	}
	if len(extra) > 0 {
		add(inbox.Finding{Check: "orphan_message", ThreadID: tid, Detail: fmt.Sprintf(
			"message files %v past message_count %d: an uncommitted write, or a header behind its log", extra, want), Repaired: repair})
	}
	if !ownEvent {
		add(inbox.Finding{Check: "missing_event", ThreadID: tid, Detail: fmt.Sprintf(
			"the header's event %d is not in the log", h.LastEventID), Repaired: repair})
	}
	if !repair {
		return h, nil
	}
	h, err := s.settle(ctx, tid, h, ownEvent)
	if err != nil {
		return nil, err
	}
	// settle appended the header's event if it was missing: its
	// message has its event now.
	if h.LastEvent != nil && h.LastEvent.MessageID != "" {
		li.msgs[h.LastEvent.MessageID] = h.LastEventID
	}
	li.ids[h.LastEventID] = tid
	return h, nil
}

// fsckLogPos checks that the header points where the line of its last
// event ends: the writer looks for the event there (hasOwnEvent) and logs
// again one it does not find. On repair the header points at the line the
// log holds.
func (s *Store) fsckLogPos(tid string, h *header, li *logIndex, add addFinding, repair bool) (*header, error) {
	ev, at := li.newest[tid], li.newestAt[tid]
	if ev == nil || ev.EventID != h.LastEventID || at == h.LogPos {
		return h, nil
	}
	f := add(inbox.Finding{Check: "stale_header", ThreadID: tid, Path: s.log.segPath(at.Segment), Detail: fmt.Sprintf(
		"log_pos says event %d ends at byte %d of segment %d, but its line ends at byte %d of segment %d: the next change on the thread would log the event again",
		h.LastEventID, h.LogPos.Offset, h.LogPos.Segment, at.Offset, at.Segment)})
	if !repair {
		return h, nil
	}
	n := h.clone()
	n.LogPos = at
	if _, err := s.appendHeader(s.threadDir(tid), n, nil, true); err != nil {
		return nil, err
	}
	f.Detail += "; the header points at it now"
	f.Repaired = true
	return n, nil
}

// fsckMessages reads each message the header counts: a damaged one is
// set aside and rebuilt on repair, and each must have its event in the
// log (appended on repair). It notes every message in byEvent (without
// its body) and the blobs they name in li.
func (s *Store) fsckMessages(ctx context.Context, tid string, h *header, li *logIndex, byEvent map[int64]*inbox.Message, add addFinding, repair bool) error {
	dir := s.threadDir(tid)
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
				return aerr
			}
			ok, rerr := s.rebuildMessage(tid, seq, h, li)
			if rerr != nil {
				return rerr
			}
			if ok {
				f.Detail += "; set aside as " + filepath.Base(bad) + " and rebuilt whole from the event log line that carries it"
				m, err = s.readMessage(tid, seq)
			} else {
				if m, err = s.replaceDamaged(tid, seq, h, li, bad); err != nil {
					return err
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
		if _, ok := li.msgs[m.MessageID]; ok || m.EventID < li.first || li.inGap(m.EventID) {
			continue
		}
		f := add(inbox.Finding{Check: "missing_event", ThreadID: tid, Path: filepath.Join(dir, msgName(seq)),
			Detail: fmt.Sprintf("message %s has no event in the log", m.MessageID)})
		if repair {
			ev := inbox.Event{RunID: h.RunID, TaskID: h.TaskID, ThreadID: tid, Source: "fsck", EventType: inbox.EventMessageAdded,
				MessageID: m.MessageID, Summary: inbox.Shorten(m.Summary, maxEventSumLen), PayloadJSON: json.RawMessage(`{"repaired":true}`),
				CreatedAt: inbox.FormatTime(s.now()), Agent: m.FromAgent, Kind: m.Kind, Status: h.Status}
			if _, _, err := s.log.append(ctx, &logEvent{Event: ev}); err != nil {
				return err
			}
			f.Repaired = true
		}
	}
	return nil
}

// fsckCursors checks the thread's read cursors against the log: a
// mark-read commits its event first, so a cursor behind its newest
// logged move lost its line (a failure or a kill between the two);
// repair writes it.
func (s *Store) fsckCursors(tid string, h *header, li *logIndex, add addFinding, repair bool) {
	dir := s.threadDir(tid)
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
}

// fsckLease checks the thread's lease file against its header (one
// planted in its place is already reported, and set aside on repair).
func (s *Store) fsckLease(tid string, h *header, add addFinding, repair bool) error {
	dir := s.threadDir(tid)
	l, err := s.readLeaseFile(tid)
	if errors.Is(err, inbox.ErrFormat) && !repair {
		return nil
	}
	if err != nil {
		return err
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
	return nil
}

// fsckHeaderLog checks that thread.log, when it holds anything, holds a
// valid header line. One that does not (garbled, every line failing its
// checksum) would have readers fall back on the thread's initial header,
// which is stale once the thread changed; repair sets it aside and
// writes the newest state the log holds for the thread.
func (s *Store) fsckHeaderLog(tid string, li *logIndex, add addFinding, repair bool) error {
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
	if _, err := s.appendHeader(s.threadDir(tid), ev.stateAt(Pos{}), nil, true); err != nil {
		return err
	}
	f.Detail += "; set aside as " + filepath.Base(bad) + " and rebuilt from the thread's newest logged state"
	f.Repaired = true
	return nil
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
