package spool

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/watcher"
)

// waiter arms a watcher on the event log before the caller scans, so that
// nothing appended after the scan can be missed.
type waiter struct {
	w        *watcher.Watcher
	opt      inbox.WaitOptions
	deadline time.Time
	timer    *time.Timer
	s        *Store
	presence *presence // registered when the wait first blocks
}

func (s *Store) newWaiter(opt inbox.WaitOptions, deadline time.Time) (*waiter, error) {
	w, err := watcher.New(s.log.dir, watcher.Options{ForcePoll: opt.ForcePoll, ExitSoon: opt.ExitSoon})
	if err != nil {
		return nil, inbox.Storage(err, "watch the event log")
	}
	if r := w.Fallback(); r != nil && opt.OnFallback != nil {
		opt.OnFallback(r)
	}
	return &waiter{w: w, opt: opt, deadline: deadline, s: s}, nil
}

func (wt *waiter) close() {
	if wt.timer != nil {
		wt.timer.Stop()
	}
	wt.presence.Release()
	wt.w.Close()
}

// wait blocks until a wake-up (true), the deadline or cancellation (false).
func (wt *waiter) wait(ctx context.Context) (bool, error) {
	left := time.Until(wt.deadline)
	if left <= 0 {
		return false, nil
	}
	if wt.timer == nil {
		wt.timer = time.NewTimer(left)
		// Blocking for real now: show the agent as waiting. A wait that
		// found its answer at once never gets here and costs nothing.
		if wt.opt.Agent != "" {
			wt.presence = wt.s.waiting(wt.opt.Agent)
		}
	}
	reported := wt.w.Fallback() != nil
	var tick <-chan time.Time
	if wt.opt.Every > 0 && wt.opt.Tick != nil {
		t := time.NewTimer(wt.opt.Every)
		defer t.Stop()
		tick = t.C
	}
	select {
	case <-tick:
		wt.opt.Tick()
		return true, nil
	case <-wt.w.C:
		if !reported && wt.opt.OnFallback != nil {
			if r := wt.w.Fallback(); r != nil {
				wt.opt.OnFallback(r)
			}
		}
		return true, nil
	case <-wt.timer.C:
		return false, nil
	case <-ctx.Done():
		return false, nil // interrupted: report it like a timeout
	}
}

// WaitReply blocks until thread tid has a message of one of kinds after the
// cursor, and returns the first such message. It returns at once when one
// already exists. On timeout the result has Woke false.
func (s *Store) WaitReply(ctx context.Context, tid string, cur inbox.ReplyCursor, f inbox.ReplyFilter, opt inbox.WaitOptions) (*inbox.WaitResult, error) {
	w, err := inbox.NewReplyWait(tid, cur, f)
	if err != nil {
		return nil, err
	}
	if opt.Agent == "" {
		opt.Agent = cur.Agent
	}
	deadline := time.Now().Add(opt.Timeout)
	h, err := s.readHeader(tid)
	if err != nil {
		return nil, err
	}
	if _, err := s.log.segments(); err != nil {
		return nil, err // nothing could wake the wait
	}
	if err := w.Start(replyThread{s, h}); err != nil {
		return nil, err
	}
	checked := 0 // messages up to this seq have been examined
	// verified is a cursor no later message of the thread can be behind:
	// the thread's last event when it was last checked (its next message
	// gets a larger event id). A timeout returns it, so the next wait does
	// not look at the same messages again.
	verified := w.AfterEvent
	check := func() (*inbox.Message, error) {
		h, err := s.readHeader(tid)
		if err != nil {
			return nil, err
		}
		verified = max(verified, h.LastEventID)
		if inbox.IsTerminal(h.Status) {
			// Nothing more will come: answer with the message that ended
			// the thread, whatever the cursor and kinds.
			return s.terminalMessage(tid, h)
		}
		var found *inbox.Message
		for seq := h.MessageCount; seq > checked; seq-- {
			m, err := s.readMessage(tid, seq)
			if isDamaged(err) {
				continue // nothing to wake for: fsck --repair sets it aside
			}
			if err != nil {
				return nil, err
			}
			if !w.After(m) {
				break
			}
			if w.Matches(m) {
				found = m // keep walking back: the earliest match wins
			}
		}
		checked = h.MessageCount
		return found, nil
	}
	// A holder's own wait keeps its lease (SPEC §4), from the moment it
	// blocks: the check right after the watch is armed.
	keeps := w.KeepsLease(&h.Thread, h.Lease, s.now())
	var keeping func()
	defer func() {
		if keeping != nil {
			keeping()
		}
	}()
	var got *inbox.Message
	woke, err := s.waitLoop(ctx, deadline, opt, func(armed bool) (bool, error) {
		if armed {
			checked = 0 // re-check everything once the watch is armed
			if keeps && keeping == nil {
				keeping = inbox.KeepLease(ctx, *h.Lease, s.now, s.Renew)
			}
		}
		m, err := check()
		got = m
		return m != nil, err
	})
	if err != nil {
		return nil, err
	}
	if !woke {
		return &inbox.WaitResult{NextEventID: verified}, nil
	}
	return w.Answer(ctx, got, s.MarkRead)
}

// waitLoop runs check until it reports what the caller waits for: check,
// arm a watch on the event log, check again, then wait for the log to
// change between later checks. Whatever lands after the caller's cursor
// is seen by one of the checks or wakes the wait; the first check runs
// unarmed, so that an answer already there costs no watch at all. armed is
// true for the check right after the watch is armed. It returns false
// when the deadline passes or ctx ends.
func (s *Store) waitLoop(ctx context.Context, deadline time.Time, opt inbox.WaitOptions, check func(armed bool) (bool, error)) (bool, error) {
	var wt *waiter
	defer func() {
		if wt != nil {
			wt.close()
		}
	}()
	armed := false
	for {
		done, err := check(armed)
		if err != nil || done {
			return done, err
		}
		armed = false
		if opt.AfterCheck != nil {
			opt.AfterCheck()
		}
		if wt == nil {
			if opt.Timeout <= 0 {
				return false, nil
			}
			if wt, err = s.newWaiter(opt, deadline); err != nil {
				return false, err
			}
			armed = true
			continue
		}
		if woke, err := wt.wait(ctx); err != nil || !woke {
			return false, err
		}
	}
}

// terminalMessage returns the message that moved a terminal thread to its
// status: the newest message carrying that status (the newest message of
// all, for a thread whose status no message records).
func (s *Store) terminalMessage(tid string, h *header) (*inbox.Message, error) {
	var newest *inbox.Message
	for seq := h.MessageCount; seq >= 1; seq-- {
		m, err := s.readMessage(tid, seq)
		if isDamaged(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if newest == nil {
			newest = m
		}
		if m.Status == h.Status {
			return m, nil
		}
	}
	return newest, nil
}

// replyThread is a thread as a wait-reply's rules see it (h: its header
// when the wait began).
type replyThread struct {
	s *Store
	h *header
}

func (t replyThread) MessageCount() int { return t.h.MessageCount }

func (t replyThread) MessageByID(id string) (*inbox.Message, error) {
	return t.s.findMessage(t.h.ThreadID, t.h.MessageCount, id)
}

func (t replyThread) ReadSeq(agent string) (int, error) {
	c, err := t.s.readCursor(t.h.ThreadID, agent)
	if c == nil || err != nil {
		return 0, err
	}
	return c.LastReadSeq, nil
}

func (t replyThread) RequestSeq(requestID string) (int, error) {
	for seq := 1; seq <= t.h.MessageCount; seq++ {
		if m, err := t.s.readMessage(t.h.ThreadID, seq); err == nil && m.RequestID == requestID {
			return seq, nil
		}
	}
	return 0, nil
}

func (t replyThread) QuestionSeq() (int, error) {
	for seq := t.h.MessageCount; seq >= 1; seq-- {
		m, err := t.s.readMessage(t.h.ThreadID, seq)
		if isDamaged(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if inbox.IsQuestion(m) {
			return seq, nil
		}
	}
	return 0, nil
}

// findMessage looks a message up by id, newest first.
func (s *Store) findMessage(tid string, count int, id string) (*inbox.Message, error) {
	for seq := count; seq >= 1; seq-- {
		m, err := s.readMessage(tid, seq)
		if isDamaged(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.MessageID == id {
			return m, nil
		}
	}
	return nil, inbox.MessageNotFound(id, tid)
}

// statusEvents are the event types that set a thread's status.
var statusEvents = []string{inbox.EventThreadCreated, inbox.EventThreadClaimed, inbox.EventThreadUpdated, inbox.EventThreadDone,
	inbox.EventThreadFailed, inbox.EventThreadCancelled, inbox.EventLeaseExpired}

// Watch blocks until a new thread is assigned to agent, or a thread the
// agent is assigned to or created changes to one of statuses (any status
// when empty), after the cursor (after, or now when nil).
func (s *Store) Watch(ctx context.Context, agent string, statuses []string, after *int64, opt inbox.WaitOptions) (*inbox.WaitResult, error) {
	if err := inbox.PrepareWatch(agent, statuses, after); err != nil {
		return nil, err
	}
	opt.Agent = agent
	deadline := time.Now().Add(opt.Timeout)
	var cursor int64
	var pos Pos
	var err error
	if after != nil {
		cursor = *after
		if pos, err = s.log.find(cursor); err != nil {
			return nil, err
		}
	} else if cursor, pos, err = s.log.lastID(); err != nil {
		return nil, err
	}
	match := func(ev *logEvent) bool {
		st := ev.State
		if st == nil || st.Mail || ev.EventID <= cursor || !slices.Contains(statusEvents, ev.EventType) {
			return false // mail is not work: watch is about work
		}
		if len(statuses) > 0 && !slices.Contains(statuses, ev.Status) {
			return false
		}
		if ev.EventType == inbox.EventThreadCreated {
			return st.offeredTo(agent)
		}
		return st.offeredTo(agent) || st.CreatedBy == agent
	}
	scanned := cursor // every event up to here has been looked at
	var found *logEvent
	woke, err := s.waitLoop(ctx, deadline, opt, func(bool) (bool, error) {
		err := s.log.scan(pos, func(ev *logEvent, end Pos) bool {
			pos = end
			scanned = max(scanned, ev.EventID)
			if match(ev) {
				found = ev
				return false
			}
			return true
		})
		return found != nil, err
	})
	if err != nil {
		return nil, err
	}
	if !woke {
		return &inbox.WaitResult{NextEventID: scanned}, nil
	}
	th := found.State.Thread
	th.LastEventID = found.EventID
	return &inbox.WaitResult{Woke: true, NextEventID: found.EventID, Event: &found.Event, Thread: &th}, nil
}

// Follow calls fn for every event after the cursor (filtered to one thread
// when tid is set), then keeps waiting for new ones until ctx is done or fn
// returns false. Timeout 0 in opt means no limit here.
func (s *Store) Follow(ctx context.Context, after int64, tid string, opt inbox.WaitOptions, fn func(ev *inbox.Event) bool) error {
	if tid != "" {
		if err := inbox.ValidateID("thread", tid); err != nil {
			return err
		}
	}
	wt, err := s.newWaiter(opt, time.Now().Add(100*365*24*time.Hour))
	if err != nil {
		return err
	}
	defer wt.close()
	pos, err := s.log.find(after)
	if err != nil {
		return err
	}
	for {
		stop := false
		err := s.log.scan(pos, func(ev *logEvent, end Pos) bool {
			pos = end
			if ev.EventID <= after || tid != "" && ev.ThreadID != tid {
				return true
			}
			after = ev.EventID
			if !fn(&ev.Event) {
				stop = true
				return false
			}
			return true
		})
		if err != nil || stop {
			return err
		}
		woke, err := wt.wait(ctx)
		if err != nil || !woke {
			return err
		}
	}
}

// find returns a position at or before the first event with an id greater
// than after: the start of a line in the segment that holds it. It
// bisects the segment by byte offset, so a long history is not read.
func (l *eventLog) find(after int64) (Pos, error) {
	segs, err := l.segments()
	if err != nil {
		return Pos{}, err
	}
	seg := segs[0]
	for _, first := range segs {
		if first <= after+1 {
			seg = first
		}
	}
	f, err := openRead(l.segPath(seg))
	if err != nil {
		return Pos{}, inbox.Storage(err, "open event log")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Pos{}, inbox.Storage(err, "stat event log")
	}
	lo, hi := int64(0), fi.Size() // lo is always a line start with ids <= after before it
	buf := make([]byte, 64<<10)
	for hi-lo > 16<<10 {
		mid := lo + (hi-lo)/2
		n, err := f.ReadAt(buf, mid)
		if err != nil && !errors.Is(err, io.EOF) {
			return Pos{}, inbox.Storage(err, "read event log")
		}
		chunk := buf[:n]
		nl := bytes.IndexByte(chunk, '\n')
		if nl < 0 || mid+int64(nl)+1 >= hi {
			break
		}
		start := nl + 1
		end := bytes.IndexByte(chunk[start:], '\n')
		if end < 0 {
			break
		}
		body, ok := checkLine(chunk[start : start+end])
		id, idOK := lineID(body)
		if !ok || !idOK {
			break // damaged middle: let the scan sort it out from lo
		}
		if id <= after {
			lo = mid + int64(start+end) + 1
		} else {
			hi = mid + int64(start)
		}
	}
	return Pos{Segment: seg, Offset: lo}, nil
}
