package spool

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// One model of reading (SPEC §7): an agent's read cursor on a thread and
// its mailbox are two views of one fact. A read moves the cursor and
// collects the agent's mailbox entries of the thread up to it; a collect
// moves the cursor to the message collected.
//
// What makes each durable:
//   - a mark-read (show --mark-read, wait-reply) is its thread.read event;
//   - a claim, done, fail or cancel reads the thread for the agent that
//     made it: its own event is the record (readOf), and the cursor line
//     and the collects follow the commit;
//   - a collect is its rename into .collected/, fsynced; the cursor line
//     it writes is rebuilt from .collected/ by replay.
//
// The collects a read makes are renames that are not fsynced: replay redoes
// them from the log (collectRead), and until then an entry a crash left
// behind shows a message already read, never hides one.

// readOf is the read cursor an event records for its agent: a thread.read
// event's payload, or the thread's newest message after a claim, done,
// fail or cancel by that agent. False when the event records none.
func readOf(ev *logEvent) (*inbox.Cursor, bool) {
	if ev.Agent == "" {
		return nil, false
	}
	switch ev.EventType {
	case inbox.EventThreadRead:
		return cursorOf(&ev.Event)
	case inbox.EventThreadClaimed, inbox.EventThreadDone, inbox.EventThreadFailed, inbox.EventThreadCancelled:
		if ev.State == nil || ev.State.MessageCount == 0 || !ownFinish(ev.Agent, ev.Message) {
			return nil, false
		}
		return &inbox.Cursor{ThreadID: ev.ThreadID, AgentID: ev.Agent, LastReadMessageID: ev.State.LatestMessageID,
			LastReadSeq: ev.State.MessageCount, ReadAt: ev.CreatedAt}, true
	}
	return nil, false
}

// ownFinish reports whether a change by agent that added m (nil: none)
// reads the thread for agent: not when its message speaks for someone
// else (a task's failure, from the task, when its parent cancels it:
// the parent must still receive it).
func ownFinish(agent string, m *msgFile) bool { return m == nil || m.FromAgent == agent }

// readThrough records, after a change committed, that agent has read the
// thread up to its newest message (h, the header the change left): the
// cursor line, then the mailbox entries collected. A failure here is not
// the change's failure: the change's event records the read (readOf).
func (s *Store) readThrough(tid string, h *header, agent string) {
	if h.MessageCount == 0 {
		return
	}
	c := &inbox.Cursor{ThreadID: tid, AgentID: agent, LastReadMessageID: h.LatestMessageID,
		LastReadSeq: h.MessageCount, ReadAt: h.UpdatedAt}
	if _, _, err := s.appendLine(filepath.Join(s.threadDir(tid), cursorName(agent)), encodeLine(c.AppendJSON(nil)), maxCursorLog, false); err != nil {
		return
	}
	s.collectRead(tid, agent, h.MessageCount)
}

// collectRead collects agent's mailbox entries of thread tid with seq up
// to upTo: messages the agent has read in their thread. It looks each
// entry up by name (the thread's headers name each message's event and
// sender), so its cost grows with the thread, not with the mailbox.
func (s *Store) collectRead(tid, agent string, upTo int) int {
	names, err := s.mailNames(s.threadDir(tid), tid, agent, upTo)
	if err != nil || len(names) == 0 {
		return 0
	}
	box := s.mailboxPath(agent)
	dst := filepath.Join(box, collectedDir)
	n := 0
	for _, name := range names {
		if os.Rename(filepath.Join(box, name), filepath.Join(dst, name)) == nil {
			n++
		}
	}
	return n
}

// mailNames returns the mailbox entry names the thread's messages up to
// upTo would have, leaving out agent's own: from the thread's headers (its
// first message's initial header, then one line of thread.log per event),
// each of which names the event that added a message and its sender, so no
// message (and no large body) is read. A message no header names (a
// header log compacted past its size) is read instead.
func (s *Store) mailNames(dir, tid, agent string, upTo int) ([]string, error) {
	type added struct {
		ev   int64
		from string
	}
	seen := make(map[int]added, upTo)
	// A header names the message its event added only when it is the
	// first with that count (a compacted log starts later).
	prev := 0
	note := func(h *header) {
		n := h.MessageCount
		if n != prev+1 {
			prev = max(prev, n)
			return
		}
		prev = n
		if n > upTo {
			return
		}
		for from, seq := range h.LastFrom {
			if seq == n {
				seen[n] = added{h.LastEventID, from}
				return
			}
		}
	}
	if h, err := initialHeader(dir, tid); err == nil {
		note(h)
	}
	data, err := readFile(filepath.Join(dir, headerLog))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if body, ok := checkLine(data[:i]); ok {
			// Most lines add no message (a renewal, a status change):
			// their count alone says so, without decoding the header.
			if n, ok := headerCount(body); ok && n != prev+1 {
				prev = max(prev, n)
			} else {
				var h header
				if h.decodeJSON(body) == nil {
					note(&h)
				}
			}
		}
		data = data[i+1:]
	}
	names := make([]string, 0, upTo)
	for seq := 1; seq <= upTo; seq++ {
		a, ok := seen[seq]
		if !ok {
			m, err := s.readMessageAt(dir, tid, seq)
			if err != nil {
				continue
			}
			a = added{m.EventID, m.FromAgent}
		}
		if a.from == agent {
			continue
		}
		names = append(names, markerName(&inbox.Message{EventID: a.ev, FromAgent: a.from, ThreadID: tid, Seq: seq}))
	}
	return names, nil
}

// countMember introduces a header line's message count: a member of the
// header object itself (no record nested in a header has one).
var countMember = []byte(`"message_count":`)

// headerCount reads the message count of a header line's JSON without
// decoding the rest of it; false when it cannot.
func headerCount(body []byte) (int, bool) {
	i := bytes.Index(body, countMember)
	if i < 0 {
		return 0, false
	}
	n, digits := 0, 0
	for _, c := range body[i+len(countMember):] {
		if c < '0' || c > '9' || digits == 9 {
			break
		}
		n, digits = n*10+int(c-'0'), digits+1
	}
	return n, digits > 0
}

// moveCursor moves agent's read cursor on thread tid to message m when it
// stands before it (a collect: SPEC §7). The collect is the durable record
// (replay rebuilds the line from .collected/), so the line is not flushed.
func (s *Store) moveCursor(ctx context.Context, agent string, m *inbox.Message) error {
	lk, err := s.lockThread(ctx, m.ThreadID)
	if err != nil {
		return err
	}
	defer lk.Unlock()
	return s.cursorTo(agent, m)
}

// cursorTo is moveCursor under the thread's lock.
func (s *Store) cursorTo(agent string, m *inbox.Message) error {
	cur, err := s.readCursor(m.ThreadID, agent)
	if err != nil || (cur != nil && cur.LastReadSeq >= m.Seq) {
		return err
	}
	c := &inbox.Cursor{ThreadID: m.ThreadID, AgentID: agent, LastReadMessageID: m.MessageID,
		LastReadSeq: m.Seq, ReadAt: inbox.FormatTime(s.now())}
	_, _, err = s.appendLine(filepath.Join(s.threadDir(m.ThreadID), cursorName(agent)), encodeLine(c.AppendJSON(nil)), maxCursorLog, false)
	return err
}

// replayCollectedCursors moves every read cursor that stands before a
// message its agent collected up to it: a collect's cursor line is not
// flushed (moveCursor), its rename into .collected/ is. The caller holds
// every lock.
func (s *Store) replayCollectedCursors() error {
	agents, err := os.ReadDir(filepath.Join(s.dir, mailboxDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return inbox.Storage(err, "list the mailboxes")
	}
	for _, a := range agents {
		agent := a.Name()
		entries, err := os.ReadDir(filepath.Join(s.mailboxPath(agent), collectedDir))
		if err != nil {
			continue
		}
		newest := map[string]int{}
		for _, e := range entries {
			if _, _, tid, seq, ok := parseMarker(e.Name()); ok && seq > newest[tid] {
				newest[tid] = seq
			}
		}
		for tid, seq := range newest {
			if !exists(s.threadDir(tid)) {
				continue
			}
			m, err := s.readMessage(tid, seq)
			if err != nil {
				continue
			}
			if err := s.cursorTo(agent, m); err != nil {
				return err
			}
		}
	}
	return nil
}
