package spool

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// message validates c and builds an unsaved message (inbox.NewMessage),
// staging a body or payload larger than MaxInline as a blob of this store.
// The blobs of the message are the caller's to discard (discardBlobs) once
// the message is committed or refused.
func (s *Store) message(ctx context.Context, now time.Time, from, to, kind string, c inbox.Content, defSummary string) (*draft, error) {
	m, blobs, err := inbox.NewMessage(ctx, now, from, to, kind, c, defSummary, blobStager{s})
	if err != nil {
		return nil, err
	}
	return &draft{Message: *m, blobs: blobs}, nil
}

// blobStager is the store as inbox.NewMessage stages blobs in it.
type blobStager struct{ s *Store }

func (b blobStager) StageBlob(ctx context.Context, field string, r io.Reader) (*inbox.Blob, error) {
	return b.s.StageBlob(ctx, field, r)
}
func (b blobStager) BlobArtifact(bl *inbox.Blob) inbox.ArtifactInput { return b.s.blobArtifact(bl) }
func (b blobStager) DiscardBlob(bl *inbox.Blob)                      { discard(bl) }

// Send creates a thread (ThreadID empty) or appends a message to one.
func (s *Store) Send(ctx context.Context, in inbox.SendInput) (*inbox.Result, error) {
	if err := inbox.PrepareSend(&in); err != nil {
		return nil, err
	}
	if in.ThreadID != "" {
		return s.appendMessage(ctx, "send", in.ThreadID, in.From, in.To, in.Kind, in.Content, func(t *inbox.Thread) error {
			return inbox.SameAsThread(t, in)
		}, false)
	}
	r, err := s.sendNew(ctx, in)
	if err == nil && !r.Replayed {
		r.Warnings = s.unknownRecipients(ctx, r.Message)
		s.acted(in.From, r.Message)
	}
	return r, err
}

// acted records that agent acted by sending m: its last activity, or its
// idle notification.
func (s *Store) acted(agent string, m *inbox.Message) {
	s.seen(agent)
	if m != nil && m.Type == inbox.TypeIdleNotification {
		s.noteIdle(agent, m)
	}
}

func (s *Store) sendNew(ctx context.Context, in inbox.SendInput) (*inbox.Result, error) {
	if in.IdempotencyKey != "" {
		unlock, err := s.lockIdem(ctx)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	t, replay, err := s.prepareThread(ctx, in)
	if err != nil || replay != nil {
		return replay, err
	}
	defer t.msg.discardBlobs()
	if err := t.commit(ctx); err != nil {
		return nil, err
	}
	return &inbox.Result{Thread: &t.h.Thread, Message: &t.msg.Message}, nil
}

// SendBatch creates several threads as one commit (one event-log append,
// one round of fsyncs), for a caller draining a burst such as the daemon.
// Every input must create a thread (no ThreadID). Results and per-input
// errors (validation) come back in input order; err is a failure of the
// whole commit, after which the caller may retry with the same
// idempotency keys.
func (s *Store) SendBatch(ctx context.Context, ins []inbox.SendInput) (results []*inbox.Result, errs []error, err error) {
	results, errs = make([]*inbox.Result, len(ins)), make([]error, len(ins))
	for _, in := range ins {
		if in.IdempotencyKey != "" {
			unlock, err := s.lockIdem(ctx)
			if err != nil {
				return nil, nil, err
			}
			defer unlock()
			break
		}
	}
	var txs []*tx
	var at []int
	first := map[string]int{}        // idempotency key → the input that carries it
	firstArgs := map[string]string{} // … and what that input was given
	for i := range ins {
		in := ins[i]
		if in.ThreadID != "" {
			errs[i] = inbox.Invalid("thread", "must be empty: SendBatch only creates threads")
			continue
		}
		if err := inbox.PrepareSend(&in); err != nil {
			errs[i] = err
			continue
		}
		if k := in.IdempotencyKey; k != "" {
			args := inbox.NewThreadArgs(in)
			if j, dup := first[k]; dup {
				if err := inbox.CheckIdemArgs(k, firstArgs[k], args); err != nil {
					errs[i] = err
					continue
				}
				errs[i] = errs[j]
				results[i] = results[j] // filled in below, after the commit
				continue
			}
			first[k], firstArgs[k] = i, args
		}
		t, replay, err := s.prepareThread(ctx, in)
		if err != nil || replay != nil {
			results[i], errs[i] = replay, err
			continue
		}
		txs = append(txs, t)
		at = append(at, i)
	}
	for _, t := range txs {
		defer t.msg.discardBlobs()
	}
	if len(txs) > 0 {
		if err := s.commitAll(ctx, txs); err != nil {
			return nil, nil, err
		}
	}
	for j, t := range txs {
		results[at[j]] = &inbox.Result{Thread: &t.h.Thread, Message: &t.msg.Message}
		// As a Send: an idle_notification taken in from a team file
		// sets its sender's presence.
		s.acted(t.msg.FromAgent, &t.msg.Message)
	}
	for i, in := range ins {
		if j, ok := first[in.IdempotencyKey]; ok && j != i && results[i] == nil && errs[i] == nil {
			results[i], errs[i] = results[j], errs[j]
		}
	}
	return results, errs, nil
}

func (s *Store) lockIdem(ctx context.Context) (unlock func(), err error) {
	lk := newLock(s.lockFile("idem.lock"), s.fileMode)
	if err := s.lockWithin(ctx, lk, "idempotency records"); err != nil {
		return nil, err
	}
	return func() { lk.Unlock() }, nil
}

// prepareThread validates a thread-creating send and stages it: it
// returns the transaction to commit, or the earlier result when the
// idempotency key was used before (the caller holds the idem lock).
func (s *Store) prepareThread(ctx context.Context, in inbox.SendInput) (*tx, *inbox.Result, error) {
	addr, err := inbox.PrepareNewThread(&in)
	if err != nil {
		return nil, nil, err
	}
	recipients, err := s.resolve(ctx, in.From, addr)
	if err != nil {
		return nil, nil, err
	}
	now := s.now()
	m, err := s.message(ctx, now, in.From, in.To, in.Kind, in.Content, strings.TrimSpace(in.Subject))
	if err != nil {
		return nil, nil, err
	}
	args := inbox.NewThreadArgs(in)
	if in.IdempotencyKey != "" {
		if r, err := s.newThreadReplay(ctx, in.IdempotencyKey, args); r != nil || err != nil {
			m.discardBlobs()
			return nil, r, err
		}
	}
	assignee := inbox.AddressNew(&m.Message, addr, recipients)
	tid := inbox.NewID("thr_", now)
	ts := inbox.FormatTime(now)
	h := &header{Thread: inbox.Thread{ThreadID: tid, RunID: in.RunID, TaskID: in.TaskID, Subject: in.Subject,
		CreatedBy: in.From, AssignedTo: assignee, Status: inbox.StatusPending, Priority: in.Priority,
		CreatedAt: ts, UpdatedAt: ts, Mail: in.Kind != inbox.KindTask}, Origin: in.Origin}
	if assignee == "" {
		h.Recipients = recipients
	}
	t := &tx{s: s, tid: tid, dir: s.threadDir(tid), now: now, h: h, newKey: in.IdempotencyKey, newArgs: args}
	t.ev = inbox.Event{EventType: inbox.EventThreadCreated, Agent: in.From, Summary: m.Summary}
	t.addMessage(m)
	if s.linkErr != nil { // refused before anything is made (commitAll refuses too)
		m.discardBlobs()
		return nil, nil, s.linkErr
	}
	if err := os.Mkdir(t.dir, s.dirMode); err != nil {
		m.discardBlobs()
		return nil, nil, inbox.Storage(err, "create thread %s", tid)
	}
	return t, nil, nil
}

// reply adds a message to thread tid with no check of its own (Steps.Reply).
func (s *Store) reply(ctx context.Context, cmd, tid, from, to, kind string, c inbox.Content) (*inbox.Result, error) {
	return s.appendMessage(ctx, cmd, tid, from, to, kind, c, nil, false)
}

// appendMessage adds a message to thread tid under its lock (inbox.Append:
// check and allowTerminal as there).
func (s *Store) appendMessage(ctx context.Context, cmd, tid, from, to, kind string, c inbox.Content, check func(*inbox.Thread) error, allowTerminal bool) (*inbox.Result, error) {
	a, err := inbox.PrepareAppend(ctx, teamDir{s}, tid, from, to)
	if err != nil {
		return nil, err
	}
	a.Check, a.AllowTerminal = check, allowTerminal
	to = a.Addr.Given
	args := inbox.MessageArgs(from, to, kind, c)
	now := s.now()
	m, err := s.message(ctx, now, from, to, kind, c, "")
	if err != nil {
		return nil, err
	}
	defer m.discardBlobs()
	if err := inbox.CheckSaysSomething(&m.Message); err != nil {
		return nil, err
	}
	var res *inbox.Result
	err = s.mutate(ctx, tid, func(t *tx) error {
		if r, err := t.idempotent(cmd, c.IdempotencyKey, args); r != nil || err != nil {
			res = r
			return err
		}
		if err := a.AddTo(&t.h.Thread, &m.Message); err != nil {
			return err
		}
		t.ev = inbox.Event{EventType: inbox.EventMessageAdded, Agent: from, Summary: m.Summary}
		t.addMessage(m)
		res = &inbox.Result{Thread: &t.h.Thread, Message: &m.Message}
		return nil
	})
	if err == nil && !res.Replayed {
		if to != "" {
			res.Warnings = s.unknownRecipients(ctx, res.Message)
		}
		s.acted(from, res.Message)
	}
	return res, err
}

// Claim grants agent the lease on a thread: status claimed, assigned_to
// agent, a new lease token. It fails with inbox.ErrLeaseConflict while another
// agent holds a live lease. The holder may claim again (a new token).
func (s *Store) Claim(ctx context.Context, agent, tid string, leaseSeconds int) (*inbox.Result, error) {
	if err := inbox.CheckLeaseArgs(agent, tid, leaseSeconds); err != nil {
		return nil, err
	}
	var res *inbox.Result
	err := s.mutate(ctx, tid, func(t *tx) error {
		l, err := inbox.ClaimLease(&t.h.Thread, t.h.Lease, agent, leaseSeconds, t.now)
		if err != nil {
			return err
		}
		warn := inbox.ClaimWarnings(&t.h.Thread, agent)
		t.setLease(l)
		t.h.Status, t.h.AssignedTo = inbox.StatusClaimed, agent
		payload := jsonrec.Fields{}.Num("lease_token", l.LeaseToken).Str("expires_at", l.ExpiresAt).JSON()
		t.ev = inbox.Event{EventType: inbox.EventThreadClaimed, Agent: agent, Summary: "claimed by " + agent, PayloadJSON: payload}
		t.readBy = agent
		res = &inbox.Result{Thread: &t.h.Thread, Lease: t.h.Lease, Warnings: warn}
		return nil
	})
	if err == nil {
		s.seen(agent)
	}
	return res, err
}

// Renew extends the holder's lease to leaseSeconds from now.
func (s *Store) Renew(ctx context.Context, agent, tid string, leaseSeconds int, token int64) (*inbox.Result, error) {
	if err := inbox.CheckLeaseArgs(agent, tid, leaseSeconds); err != nil {
		return nil, err
	}
	var res *inbox.Result
	err := s.mutate(ctx, tid, func(t *tx) error {
		l, err := inbox.RenewLease(&t.h.Thread, t.h.Lease, agent, token, leaseSeconds, t.now)
		if err != nil {
			return err
		}
		t.setLease(l)
		payload := jsonrec.Fields{}.Num("lease_token", l.LeaseToken).Str("expires_at", l.ExpiresAt).JSON()
		t.ev = inbox.Event{EventType: inbox.EventLeaseRenewed, Agent: agent, Summary: "lease renewed by " + agent, PayloadJSON: payload}
		res = &inbox.Result{Thread: &t.h.Thread, Lease: t.h.Lease}
		return nil
	})
	if err == nil {
		s.seen(agent)
	}
	return res, err
}

// holderMessage commits a holder's step (inbox.HolderStep): its message
// and the thread's move to the step's status, under the thread's lock.
func (s *Store) holderMessage(ctx context.Context, cmd, agent, tid, status string, token int64, c inbox.Content) (*inbox.Result, error) {
	st, err := inbox.PrepareHolderStep(cmd, agent, tid, status, c)
	if err != nil {
		return nil, err
	}
	now := s.now()
	m, err := s.message(ctx, now, agent, "", st.Kind, c, st.DefaultSummary)
	if err != nil {
		return nil, err
	}
	defer m.discardBlobs()
	m.Status = st.Status
	args := inbox.HolderArgs(agent, status, c)
	var res *inbox.Result
	err = s.mutate(ctx, tid, func(t *tx) error {
		if r, err := t.idempotent(cmd, c.IdempotencyKey, args); r != nil || err != nil {
			res = r
			return err
		}
		if err := st.Check(&t.h.Thread, t.h.Lease, agent, token, t.now); err != nil {
			return err
		}
		m.ToAgent = t.h.CreatedBy
		res = t.transition(agent, st.Status, st.EventType, m, nil)
		return nil
	})
	if err == nil {
		s.seen(agent)
	}
	return res, err
}

// transition moves the thread to status with message m (from agent),
// releasing a held lease when the status is terminal, and records the
// event (its payload: from, to and extra).
func (t *tx) transition(agent, status, evType string, m *draft, extra jsonrec.Fields) *inbox.Result {
	from := t.h.Status
	t.h.Status = status
	if inbox.IsTerminal(status) && t.h.Lease != nil && !t.h.Lease.Released() {
		l := *t.h.Lease
		l.Release(inbox.FormatTime(t.now))
		t.setLease(l)
	}
	payload := append(jsonrec.Fields{}.Str("from", from).Str("to", status), extra...).JSON()
	t.ev = inbox.Event{EventType: evType, Agent: agent, Summary: m.Summary, PayloadJSON: payload}
	if inbox.IsTerminal(status) && m.FromAgent == agent {
		t.readBy = agent
	}
	t.addMessage(m)
	return &inbox.Result{Thread: &t.h.Thread, Message: &m.Message, Lease: t.h.Lease}
}

// Cancel moves a live thread to cancelled; any agent (a leader) may cancel.
// A lease, if any, is released.
func (s *Store) Cancel(ctx context.Context, agent, tid string, c inbox.Content) (*inbox.Result, error) {
	if err := inbox.CheckAgentThread(agent, tid); err != nil {
		return nil, err
	}
	now := s.now()
	m, err := s.message(ctx, now, agent, "", inbox.KindControl, c, "cancelled by "+agent)
	if err != nil {
		return nil, err
	}
	defer m.discardBlobs()
	m.Status = inbox.StatusCancelled
	args := inbox.CancelArgs(agent, c)
	var res *inbox.Result
	err = s.mutate(ctx, tid, func(t *tx) error {
		if r, err := t.idempotent("cancel", c.IdempotencyKey, args); r != nil || err != nil {
			res = r
			return err
		}
		if inbox.IsTerminal(t.h.Status) {
			return inbox.InvalidState("thread %s is already %s; it cannot be cancelled", tid, t.h.Status)
		}
		m.ToAgent = t.h.AssignedTo
		if m.ToAgent == "" && len(t.h.Recipients) > 0 {
			// Offered to several and claimed by none: all of them hear.
			m.ToAgent, m.Recipients = strings.Join(t.h.Recipients, ","), t.h.Recipients
		}
		res = t.transition(agent, inbox.StatusCancelled, inbox.EventThreadCancelled, m, nil)
		return nil
	})
	if err == nil {
		s.seen(agent)
	}
	return res, err
}

// MarkRead advances agent's read cursor in a thread to message seq (0:
// the latest). The cursor never moves backwards.
func (s *Store) MarkRead(ctx context.Context, agent, tid string, seq int) (*inbox.Cursor, error) {
	if err := inbox.CheckAgentThread(agent, tid); err != nil {
		return nil, err
	}
	if s.linkErr != nil {
		return nil, s.linkErr
	}
	lk, err := s.lockThread(ctx, tid)
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	h, err := s.readHeader(tid)
	if err != nil {
		return nil, err
	}
	cur, err := s.readCursor(tid, agent)
	if err != nil {
		return nil, err
	}
	if seq <= 0 || seq > h.MessageCount {
		seq = h.MessageCount
	}
	if cur != nil && cur.LastReadSeq >= seq {
		// (What a crash left in the mailbox after the move goes now.)
		s.collectRead(tid, agent, cur.LastReadSeq)
		return cur, nil
	}
	mid := h.LatestMessageID
	if seq != h.MessageCount {
		m, err := s.readMessage(tid, seq)
		if err != nil {
			return nil, err
		}
		mid = m.MessageID
	}
	c := &inbox.Cursor{ThreadID: tid, AgentID: agent, LastReadMessageID: mid, LastReadSeq: seq, ReadAt: inbox.FormatTime(s.now())}
	// The event is the commit point (SPEC §8): it is appended and flushed
	// before the cursor line is written, so a cursor line never stands
	// ahead of the log. A mark-read killed between the two leaves the
	// cursor behind its event, and the next one writes both again; one
	// that stood ahead (the cursor first, its event lost) would have made
	// the next mark-read of the same message acknowledge without an event.
	payload := jsonrec.Fields{}.Str("last_read_message_id", c.LastReadMessageID).Num("last_read_seq", int64(c.LastReadSeq)).JSON()
	ev := inbox.Event{RunID: h.RunID, TaskID: h.TaskID, ThreadID: tid, Source: s.source, EventType: inbox.EventThreadRead,
		MessageID: c.LastReadMessageID, Summary: "read by " + agent, PayloadJSON: payload, CreatedAt: c.ReadAt,
		Agent: agent, Status: h.Status}
	if _, _, err := s.log.append(ctx, &logEvent{Event: ev}); err != nil {
		return nil, err
	}
	if markReadDies != nil && markReadDies() {
		return nil, errMarkReadDied
	}
	// The cursor line itself needs no flush of its own: after a power cut
	// replay rewrites it from the event (checkpoint.go).
	if _, _, err := s.appendLine(filepath.Join(s.threadDir(tid), cursorName(agent)), encodeLine(c.AppendJSON(nil)), maxCursorLog, false); err != nil {
		return nil, err
	}
	s.collectRead(tid, agent, seq)
	s.seen(agent)
	return c, nil
}

// markReadDies, set by the power-cut test, makes a MarkRead give up
// between its two writes as if its process were killed there.
var markReadDies func() bool

var errMarkReadDied = errors.New("mark-read died between its writes (test)")

func (s *Store) readCursor(tid, agent string) (*inbox.Cursor, error) {
	body, err := readLastLine(filepath.Join(s.threadDir(tid), cursorName(agent)))
	if err != nil {
		return nil, inbox.Storage(err, "read cursor of %s in %s", agent, tid)
	}
	if body == nil {
		return nil, nil
	}
	var c inbox.Cursor
	if err := c.DecodeJSON(body); err != nil {
		return nil, corrupt(err, "thread %s: read cursor of %s is not valid JSON", tid, agent)
	}
	return &c, nil
}
