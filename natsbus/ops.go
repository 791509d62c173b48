package natsbus

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
)

// message validates c and builds an unsaved message: a body or payload
// over inlineMax, or one that is not text, goes to the blob store first.
func (b *Bus) message(ctx context.Context, now time.Time, from, to, kind string, c inbox.Content, def string) (*inbox.Message, error) {
	st := blobStager{b}
	c.Blobs = slices.Clone(c.Blobs)
	if len(c.Body) > inlineMax {
		bl, err := b.StageBlob(ctx, "body", strings.NewReader(c.Body))
		if err != nil {
			return nil, err
		}
		c.Body, c.Blobs = "", append(c.Blobs, bl)
	}
	if len(c.PayloadJSON) > inlineMax {
		if _, err := inbox.ValidJSON("payload_json", c.PayloadJSON, "{}", 0); err != nil {
			for _, bl := range c.Blobs {
				st.DiscardBlob(bl)
			}
			return nil, err
		}
		bl, err := b.StageBlob(ctx, "payload_json", strings.NewReader(c.PayloadJSON))
		if err != nil {
			return nil, err
		}
		c.PayloadJSON, c.Blobs = "", append(c.Blobs, bl)
	}
	m, blobs, err := inbox.NewMessage(ctx, now, from, to, kind, c, def, st)
	if err != nil {
		return nil, err
	}
	for i, bl := range blobs {
		if err := b.store(ctx, bl); err != nil {
			for _, rest := range blobs[i+1:] {
				st.DiscardBlob(rest)
			}
			return nil, err
		}
	}
	return m, nil
}

// Send creates a thread (ThreadID empty) or appends a message to one.
func (b *Bus) Send(ctx context.Context, in inbox.SendInput) (*inbox.Result, error) {
	if err := inbox.PrepareSend(&in); err != nil {
		return nil, err
	}
	if in.ThreadID != "" {
		return b.appendMessage(ctx, "send", in.ThreadID, in.From, in.To, in.Kind, in.Content, func(r *record) error {
			return inbox.SameAsThread(&r.Thread, in)
		}, false)
	}
	r, err := b.sendNew(ctx, in, "", "")
	if err == nil && !r.Replayed {
		r.Warnings = b.unknownRecipients(ctx, r.Message)
	}
	return r, err
}

// sendNew creates a thread; taskName, when set, makes it that task's
// thread (its first message is the prompt, not mail).
func (b *Bus) sendNew(ctx context.Context, in inbox.SendInput, taskName, owner string) (*inbox.Result, error) {
	addr, err := inbox.PrepareNewThread(&in)
	if err != nil {
		return nil, err
	}
	recipients, err := b.resolve(ctx, in.From, addr)
	if err != nil {
		return nil, err
	}
	now := b.now()
	m, err := b.message(ctx, now, in.From, in.To, in.Kind, in.Content, strings.TrimSpace(in.Subject))
	if err != nil {
		return nil, err
	}
	assignee := inbox.AddressNew(m, addr, recipients)
	tid := inbox.NewID("thr_", now)
	if in.IdempotencyKey != "" {
		if err := inbox.ValidateIdemKey(in.IdempotencyKey); err != nil {
			return nil, err
		}
		if tid, err = b.claimKey(ctx, in.IdempotencyKey, tid, inbox.NewThreadArgs(in)); err != nil {
			return nil, err
		}
		if res, err := b.createdBefore(ctx, tid); res != nil || err != nil {
			return res, err
		}
	}
	if taskName != "" {
		if err := b.registerTask(ctx, taskName, tid); err != nil {
			return nil, err
		}
	}
	ts := inbox.FormatTime(now)
	r := &record{Prompt: taskName != "", By: owner, Thread: inbox.Thread{ThreadID: tid, RunID: in.RunID, TaskID: in.TaskID, Subject: in.Subject,
		CreatedBy: in.From, AssignedTo: assignee, Status: inbox.StatusPending, Priority: in.Priority,
		CreatedAt: ts, UpdatedAt: ts, Mail: in.Kind != inbox.KindTask}, Origin: in.Origin}
	if assignee == "" {
		r.Thread.Recipients = recipients
	}
	c := &change{b: b, now: now, r: r}
	c.r.Event = inbox.Event{EventType: inbox.EventThreadCreated, Agent: in.From, Summary: m.Summary}
	c.addMessage(m)
	got, err := b.commit(ctx, c, 0)
	if errors.Is(err, errRetry) && in.IdempotencyKey != "" {
		return b.createdBefore(ctx, tid) // the same key's other attempt got there first
	}
	if err != nil {
		return nil, err
	}
	return &inbox.Result{Thread: &got.Thread, Message: got.Message}, nil
}

// createdBefore replays the creation of thread tid when it exists.
func (b *Bus) createdBefore(ctx context.Context, tid string) (*inbox.Result, error) {
	v, err := b.Show(ctx, tid)
	if errors.Is(err, inbox.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(v.Messages) == 0 {
		return nil, inbox.Corrupt(nil, "thread %s has no first message", tid)
	}
	return &inbox.Result{Thread: v.Thread, Message: v.Messages[0], Lease: v.Lease, Replayed: true}, nil
}

// reply adds a message to thread tid with no check of its own (Steps.Reply).
func (b *Bus) reply(ctx context.Context, cmd, tid, from, to, kind string, c inbox.Content) (*inbox.Result, error) {
	return b.appendMessage(ctx, cmd, tid, from, to, kind, c, nil, false)
}

// appendMessage adds a message to thread tid (inbox.Append), with the
// change's compare-and-set; check (optional) runs first on the thread's
// record as the change sees it.
func (b *Bus) appendMessage(ctx context.Context, cmd, tid, from, to, kind string, c inbox.Content, check func(*record) error, allowTerminal bool) (*inbox.Result, error) {
	a, err := inbox.PrepareAppend(ctx, teamDir{b}, tid, from, to)
	if err != nil {
		return nil, err
	}
	a.AllowTerminal = allowTerminal
	to = a.Addr.Given
	args := inbox.MessageArgs(from, to, kind, c)
	m0, err := b.message(ctx, b.now(), from, to, kind, c, "")
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckSaysSomething(m0); err != nil {
		return nil, err
	}
	r, err := b.mutate(ctx, tid, func(ch *change) error {
		if err := ch.idempotent(ctx, cmd, c.IdempotencyKey, args); err != nil {
			return err
		}
		if check != nil {
			if err := check(ch.r); err != nil {
				return err
			}
		}
		m := *m0
		if err := a.AddTo(&ch.r.Thread, &m); err != nil {
			return err
		}
		ch.r.Event = inbox.Event{EventType: inbox.EventMessageAdded, Agent: from, Summary: m.Summary}
		ch.addMessage(&m)
		return nil
	})
	var rp *replay
	if errors.As(err, &rp) {
		return rp.res, nil
	}
	if err != nil {
		return nil, err
	}
	res := &inbox.Result{Thread: &r.Thread, Message: r.Message}
	if to != "" {
		res.Warnings = b.unknownRecipients(ctx, res.Message)
	}
	return res, nil
}

// Claim grants agent the lease on a thread under a compare-and-set on the
// thread's subject: of any number of concurrent claimers, one wins.
func (b *Bus) Claim(ctx context.Context, agent, tid string, leaseSeconds int) (*inbox.Result, error) {
	if err := inbox.CheckLeaseArgs(agent, tid, leaseSeconds); err != nil {
		return nil, err
	}
	var warn []string
	res, err := b.readResult(ctx, agent)(b.mutateResult(ctx, tid, func(c *change) error {
		t := &c.r.Thread
		l, err := inbox.ClaimLease(t, c.r.Lease, agent, leaseSeconds, c.now)
		if err != nil {
			return err
		}
		warn = inbox.ClaimWarnings(t, agent)
		c.r.Lease = &l
		t.Status, t.AssignedTo = inbox.StatusClaimed, agent
		c.r.Event = inbox.Event{EventType: inbox.EventThreadClaimed, Agent: agent, Summary: "claimed by " + agent,
			PayloadJSON: leasePayload(&l)}
		c.readAll(agent)
		return nil
	}))
	if res != nil {
		res.Warnings = warn
	}
	return res, err
}

func leasePayload(l *inbox.Lease) json.RawMessage {
	data, _ := json.Marshal(struct {
		Token   int64  `json:"lease_token"`
		Expires string `json:"expires_at"`
	}{l.LeaseToken, l.ExpiresAt})
	return data
}

// Renew extends the holder's lease to leaseSeconds from now.
func (b *Bus) Renew(ctx context.Context, agent, tid string, leaseSeconds int, token int64) (*inbox.Result, error) {
	if err := inbox.CheckLeaseArgs(agent, tid, leaseSeconds); err != nil {
		return nil, err
	}
	return b.mutateResult(ctx, tid, func(c *change) error {
		l, err := inbox.RenewLease(&c.r.Thread, c.r.Lease, agent, token, leaseSeconds, c.now)
		if err != nil {
			return err
		}
		c.r.Lease = &l
		c.r.Event = inbox.Event{EventType: inbox.EventLeaseRenewed, Agent: agent, Summary: "lease renewed by " + agent,
			PayloadJSON: leasePayload(c.r.Lease)}
		return nil
	})
}

// holderMessage publishes a holder's step (inbox.HolderStep): its
// message and the thread's move to the step's status.
func (b *Bus) holderMessage(ctx context.Context, cmd, agent, tid, status string, token int64, c inbox.Content) (*inbox.Result, error) {
	st, err := inbox.PrepareHolderStep(cmd, agent, tid, status, c)
	if err != nil {
		return nil, err
	}
	m0, err := b.message(ctx, b.now(), agent, "", st.Kind, c, st.DefaultSummary)
	if err != nil {
		return nil, err
	}
	m0.Status = st.Status
	args := inbox.HolderArgs(agent, status, c)
	return b.readResult(ctx, agent)(b.mutateResult(ctx, tid, func(ch *change) error {
		if err := ch.idempotent(ctx, cmd, c.IdempotencyKey, args); err != nil {
			return err
		}
		t := &ch.r.Thread
		if err := st.Check(t, ch.r.Lease, agent, token, ch.now); err != nil {
			return err
		}
		m := *m0
		m.ToAgent = t.CreatedBy
		ch.transition(agent, st.Status, st.EventType, &m)
		return nil
	}))
}

// transition moves the thread to status with message m, releasing a held
// lease when the status is terminal.
func (c *change) transition(agent, status, evType string, m *inbox.Message) {
	t := &c.r.Thread
	from := t.Status
	t.Status = status
	if inbox.IsTerminal(status) && c.r.Lease != nil && !c.r.Lease.Released() {
		c.r.Lease.Release(inbox.FormatTime(c.now))
	}
	data, _ := json.Marshal(struct {
		From string `json:"from"`
		To   string `json:"to"`
	}{from, status})
	c.r.Event = inbox.Event{EventType: evType, Agent: agent, Summary: m.Summary, PayloadJSON: data}
	c.addMessage(m)
	if inbox.IsTerminal(status) && m.FromAgent == agent {
		c.readAll(agent)
	}
}

// Cancel moves a live thread to cancelled; any agent may cancel.
func (b *Bus) Cancel(ctx context.Context, agent, tid string, c inbox.Content) (*inbox.Result, error) {
	if err := inbox.CheckAgentThread(agent, tid); err != nil {
		return nil, err
	}
	m0, err := b.message(ctx, b.now(), agent, "", inbox.KindControl, c, "cancelled by "+agent)
	if err != nil {
		return nil, err
	}
	m0.Status = inbox.StatusCancelled
	args := inbox.CancelArgs(agent, c)
	return b.readResult(ctx, agent)(b.mutateResult(ctx, tid, func(ch *change) error {
		if err := ch.idempotent(ctx, "cancel", c.IdempotencyKey, args); err != nil {
			return err
		}
		t := &ch.r.Thread
		if inbox.IsTerminal(t.Status) {
			return inbox.InvalidState("thread %s is already %s; it cannot be cancelled", tid, t.Status)
		}
		m := *m0
		m.ToAgent = t.AssignedTo
		if m.ToAgent == "" && len(t.Recipients) > 0 {
			m.ToAgent, m.Recipients = strings.Join(t.Recipients, ","), t.Recipients
		}
		ch.transition(agent, inbox.StatusCancelled, inbox.EventThreadCancelled, &m)
		return nil
	}))
}

// MarkRead advances agent's read cursor in a thread to message seq (0:
// the latest); it never moves backwards. The cursor is part of the
// thread's state, moved by a thread_read event.
func (b *Bus) MarkRead(ctx context.Context, agent, tid string, seq int) (*inbox.Cursor, error) {
	if err := inbox.CheckAgentThread(agent, tid); err != nil {
		return nil, err
	}
	c, err := b.moveCursor(ctx, agent, tid, seq)
	if err == nil {
		b.collectRead(ctx, agent, tid, c.LastReadSeq)
	}
	return c, err
}

// moveCursor is MarkRead without the collects: the cursor alone.
func (b *Bus) moveCursor(ctx context.Context, agent, tid string, seq int) (*inbox.Cursor, error) {
	var kept *inbox.Cursor
	r, err := b.mutate(ctx, tid, func(c *change) error {
		t := &c.r.Thread
		want := seq
		if want <= 0 || want > t.MessageCount {
			want = t.MessageCount
		}
		if cur, ok := c.r.Cursors[agent]; ok && cur.LastReadSeq >= want {
			kept = &cur
			return errKeep
		}
		mid := t.LatestMessageID
		if want != t.MessageCount {
			m, err := b.messageAt(ctx, tid, want)
			if err != nil {
				return err
			}
			mid = m.MessageID
		}
		cur := inbox.Cursor{ThreadID: tid, AgentID: agent, LastReadMessageID: mid, LastReadSeq: want, ReadAt: inbox.FormatTime(c.now)}
		c.r.Cursors[agent] = cur
		data, _ := json.Marshal(struct {
			ID  string `json:"last_read_message_id"`
			Seq int    `json:"last_read_seq"`
		}{mid, want})
		c.r.Event = inbox.Event{EventType: inbox.EventThreadRead, MessageID: mid, Summary: "read by " + agent, PayloadJSON: data, Agent: agent}
		return nil
	})
	if err == errKeep {
		return kept, nil
	}
	if err != nil {
		return nil, err
	}
	cur := r.Cursors[agent]
	return &cur, nil
}
