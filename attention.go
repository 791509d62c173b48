package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Needs attention (SPEC §15): what only a person can unblock, computed
// from what any Bus can say, so that it reads the same on every backend.

// Kinds of AttentionItem.
const (
	// AttentionBlocked is a blocked thread whose question has no answer
	// yet: no message of kind answer came after it. Nothing else answers
	// it, whoever sends it: a progress note, a question back, a control
	// message. An answer leaves the list at once, before the holder
	// resumes (its status may still say blocked).
	AttentionBlocked = "blocked"
	// AttentionRequest is a request (a message with a request id) that no
	// later message of its thread answers with the same request id.
	AttentionRequest = "request"
	// AttentionUnacknowledged is a message that asked for an
	// acknowledgment some recipient has not given after
	// AttentionOptions.AckAge.
	AttentionUnacknowledged = "unacknowledged"
	// AttentionGoneWithLease is an agent gone (AgentInfo.State) that
	// still holds a lease: one that ran out and that no one took back.
	AttentionGoneWithLease = "gone_with_lease"
	// AttentionExpiredLease is a lease past its expiry that no one took
	// back (no daemon expired it, no agent claimed the thread again).
	AttentionExpiredLease = "expired_lease"
	// AttentionFailedTask is a task that failed.
	AttentionFailedTask = "failed_task"
)

// AttentionKinds lists the kinds of AttentionItem.
var AttentionKinds = []string{AttentionBlocked, AttentionRequest, AttentionUnacknowledged,
	AttentionGoneWithLease, AttentionExpiredLease, AttentionFailedTask}

// DefaultAckAge is how long an acknowledgment may be owed before it needs
// attention.
const DefaultAckAge = 5 * time.Minute

// AttentionOptions tune Attention.
type AttentionOptions struct {
	// AckAge is how long an acknowledgment may be owed before the message
	// is listed (0: DefaultAckAge).
	AckAge time.Duration
}

// AttentionReport is the needs-attention list: /api/attention's
// {"items":[…],"counts":{…}}.
type AttentionReport struct {
	// Items are oldest first (by WaitingSince, then thread).
	Items []AttentionItem `json:"items"`
	// Counts has every kind of AttentionKinds, 0 when none.
	Counts map[string]int `json:"counts"`
}

// AttentionItem is one thing that needs someone to act.
type AttentionItem struct {
	Kind     string `json:"kind"`
	ThreadID string `json:"thread_id,omitempty"`
	Subject  string `json:"subject,omitempty"`
	// Agent is whom the item is about: the holder of a blocked thread or
	// of a lease, who asked a request or an acknowledgment, the gone
	// agent, the failed task's name.
	Agent string `json:"agent,omitempty"`
	// WaitingOn are the agents who must act: answer the question,
	// respond to the request, acknowledge the message; for a failed
	// task its parent (who gets its result).
	WaitingOn []string `json:"waiting_on"`
	// MessageID, Summary and Body are the message that needs acting on:
	// the question, the request, the message owed an acknowledgment, the
	// failure of a task.
	MessageID string `json:"message_id,omitempty"`
	Summary   string `json:"summary,omitempty"`
	Body      string `json:"body,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// LeaseToken and ExpiresAt are the lease that expired (an expired
	// lease, a gone agent's).
	LeaseToken int64  `json:"lease_token,omitempty"`
	ExpiresAt  string `json:"expires_at,omitempty"`
	// WaitingSince is when the wait began: the question, request or
	// message was sent, the lease ran out, the task failed.
	WaitingSince   string `json:"waiting_since"`
	WaitingSeconds int64  `json:"waiting_seconds"`
}

// Attention computes the needs-attention list of bus at now, reading the
// whole event log once to find the open requests and acknowledgments; a
// caller that asks again keeps an AttentionTracker instead.
func Attention(ctx context.Context, bus Bus, now time.Time, opt AttentionOptions) (*AttentionReport, error) {
	return NewAttentionTracker(bus).Attention(ctx, now, opt)
}

// AttentionTracker keeps what the needs-attention list and the wait graph
// need of the event log (the open requests, the acknowledgments owed, the
// failures of finished tasks), brought up to the log's end on each call:
// a caller that asks on every change (the dashboard) reads each event
// once, and the first call reads the whole log. The rest (blocked
// threads, leases, tasks, agents, waits) is asked of the bus on each
// call through its indexes. Safe for concurrent use.
type AttentionTracker struct {
	bus Bus

	mu    sync.Mutex
	built bool  // the log was read once
	upTo  int64 // the last event looked at
	// requests are the open requests by thread and request id; closed
	// the answered ones (a later message carrying the id answers again,
	// it asks nothing).
	requests map[requestKey]*openRequest
	closed   map[requestKey]bool
	// asks are the messages that asked for an acknowledgment still owed,
	// by message id; asksIn their ids by thread.
	asks   map[string]*ackAsk
	asksIn map[string][]string
	// failures caches a failed task's failure (its thread's last
	// message), by thread: a finished thread no longer changes.
	failures map[string]*Message
}

type requestKey struct{ thread, id string }

type openRequest struct {
	thread, from string
	responders   []string
	m            *Message
}

type ackAsk struct {
	m    *Message
	owed []string
}

// NewAttentionTracker returns a tracker of bus that has read nothing yet.
func NewAttentionTracker(bus Bus) *AttentionTracker {
	return &AttentionTracker{bus: bus, requests: map[requestKey]*openRequest{}, closed: map[requestKey]bool{},
		asks: map[string]*ackAsk{}, asksIn: map[string][]string{}, failures: map[string]*Message{}}
}

// Feed hands the tracker an event the caller follows (Bus.Follow), so
// that a later call does not read the log again: events are to be fed in
// order. An event it has seen is ignored; one after a gap (an event id
// not next to the last one seen) makes it read the log up to it.
func (t *AttentionTracker) Feed(ctx context.Context, ev *Event) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !t.built || ev.EventID > t.upTo+1:
		return t.catchUp(ctx)
	case ev.EventID <= t.upTo:
		return nil
	}
	if err := t.noteEvent(ctx, ev); err != nil {
		return fmt.Errorf("read event %d's message: %w", ev.EventID, err)
	}
	t.upTo = ev.EventID
	return nil
}

// historian is a backend that hands out its event log with the messages
// the events added (spool's and natsbus's History, which migrate reads):
// the tracker's first catch-up reads it instead of each message's file.
type historian interface {
	History(fn func(e *HistoryEntry) error) error
}

type historianCtx interface {
	History(ctx context.Context, fn func(e *HistoryEntry) error) error
}

// catchUp reads the events after the last one looked at, and the
// messages they add; nothing when the log has no newer event. Called
// with t.mu held.
func (t *AttentionTracker) catchUp(ctx context.Context) error {
	last, err := t.bus.LastEventID(ctx)
	if err != nil {
		return fmt.Errorf("read the event log's end: %w", err)
	}
	if t.built && last <= t.upTo {
		return nil
	}
	if !t.built {
		t.built = true
		if err := t.readHistory(ctx); err != nil {
			return err
		}
	}
	var merr error
	err = t.bus.Events(ctx, t.upTo, func(ev *Event) bool {
		if merr = t.noteEvent(ctx, ev); merr != nil {
			return false
		}
		t.upTo = ev.EventID
		return ctx.Err() == nil
	})
	if err == nil {
		err = cmp.Or(merr, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("read the event log after event %d: %w", t.upTo, err)
	}
	return nil
}

// readHistory reads the whole log with its messages when the backend
// hands it out so (historian); the events after it are read as any.
func (t *AttentionTracker) readHistory(ctx context.Context) error {
	fn := func(e *HistoryEntry) error {
		if e.Message != nil {
			t.note(e.Message)
		} else if err := t.noteEvent(ctx, &e.Event); err != nil {
			return err // a line without its message (format 1)
		}
		t.upTo = e.Event.EventID
		return ctx.Err()
	}
	var err error
	switch h := t.bus.(type) {
	case historian:
		err = h.History(fn)
	case historianCtx:
		err = h.History(ctx, fn)
	}
	if err != nil {
		return fmt.Errorf("read the event log: %w", err)
	}
	return nil
}

// noteEvent notes the message ev added, if any.
func (t *AttentionTracker) noteEvent(ctx context.Context, ev *Event) error {
	if ev.MessageID == "" || ev.ThreadID == "" {
		return nil
	}
	m, err := t.messageOf(ctx, ev)
	if m != nil {
		t.note(m)
	}
	return err
}

// messageOf reads the message event ev added: the thread's last message
// when it still is, else the one of the thread's messages; nil when the
// thread is gone (archived: nothing in it needs attention).
func (t *AttentionTracker) messageOf(ctx context.Context, ev *Event) (*Message, error) {
	_, last, err := t.bus.LastMessage(ctx, ev.ThreadID)
	if err == nil && last != nil && last.MessageID == ev.MessageID {
		return last, nil
	}
	v, err := t.bus.Show(ctx, ev.ThreadID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, m := range v.Messages {
		if m.MessageID == ev.MessageID {
			return m, nil
		}
	}
	return nil, nil
}

// note records what message m asks or answers.
func (t *AttentionTracker) note(m *Message) {
	if m.RequestID != "" {
		k := requestKey{m.ThreadID, m.RequestID}
		switch {
		case t.requests[k] != nil:
			delete(t.requests, k)
			t.closed[k] = true
		case !t.closed[k]:
			var to []string
			for _, r := range RecipientsOf(m) {
				if r != m.FromAgent {
					to = append(to, r)
				}
			}
			t.requests[k] = &openRequest{thread: m.ThreadID, from: m.FromAgent, responders: to, m: m}
		}
	}
	if WantsAck(m) {
		t.asks[m.MessageID] = &ackAsk{m: m, owed: slices.Clone(RecipientsOf(m))}
		t.asksIn[m.ThreadID] = append(t.asksIn[m.ThreadID], m.MessageID)
	}
	if id := AckedID(m); id != "" {
		for _, mid := range t.asksIn[m.ThreadID] {
			a := t.asks[mid]
			if a == nil || !AckNames(a.m, id) || !slices.Contains(a.owed, m.FromAgent) {
				continue
			}
			a.owed = slices.DeleteFunc(a.owed, func(n string) bool { return n == m.FromAgent })
			if len(a.owed) == 0 {
				delete(t.asks, mid)
				t.asksIn[m.ThreadID] = slices.DeleteFunc(t.asksIn[m.ThreadID], func(id string) bool { return id == mid })
			}
			break
		}
	}
}

// openRequests returns the requests without a response, oldest first.
func (t *AttentionTracker) openRequests(ctx context.Context) ([]*openRequest, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.catchUp(ctx); err != nil {
		return nil, err
	}
	out := make([]*openRequest, 0, len(t.requests))
	for _, r := range t.requests {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *openRequest) int { return cmp.Compare(a.m.EventID, b.m.EventID) })
	return out, nil
}

// blockedQuestion is a blocked thread's unanswered question.
type blockedQuestion struct {
	thread    *Thread
	holder    string
	answerers []string
	m         *Message
}

// blockedQuestions lists the blocked threads whose question has no answer
// yet. A thread whose last message is its question or an answer costs
// one read; one that has more after it is read whole.
func (t *AttentionTracker) blockedQuestions(ctx context.Context) ([]*blockedQuestion, error) {
	ths, err := t.bus.List(ctx, ListFilter{Statuses: []string{StatusBlocked}, Limit: MaxLimit})
	if err != nil {
		return nil, fmt.Errorf("list the blocked threads: %w", err)
	}
	var out []*blockedQuestion
	for _, th := range ths {
		q, err := t.question(ctx, th)
		if errors.Is(err, ErrNotFound) {
			continue // archived meanwhile
		}
		if err != nil {
			return nil, err
		}
		if q != nil {
			out = append(out, q)
		}
	}
	return out, nil
}

// question returns the unanswered question of blocked thread th, nil
// when it was answered.
func (t *AttentionTracker) question(ctx context.Context, th *Thread) (*blockedQuestion, error) {
	var msgs []*Message
	var lease *Lease
	_, last, err := t.bus.LastMessage(ctx, th.ThreadID)
	if err != nil {
		return nil, err
	}
	if last != nil && last.Kind == KindAnswer {
		return nil, nil // the newest message answers whatever came before
	}
	if last == nil || last.Status != StatusBlocked {
		v, err := t.bus.Show(ctx, th.ThreadID)
		if err != nil {
			return nil, err
		}
		th, msgs, lease = v.Thread, v.Messages, v.Lease
	} else {
		msgs = []*Message{last}
	}
	holder := th.AssignedTo
	if lease != nil && !lease.Released() && lease.AgentID != "" {
		holder = lease.AgentID
	}
	q := -1
	for i, m := range msgs {
		if m.Status == StatusBlocked {
			q = i
		}
	}
	if q < 0 {
		return nil, nil // blocked without a question message (cannot happen)
	}
	for _, m := range msgs[q+1:] {
		if m.Kind == KindAnswer {
			return nil, nil // from anyone: the dashboard answers as its own identity
		}
	}
	m := msgs[q]
	if holder == "" {
		holder = m.FromAgent
	}
	var to []string
	for _, r := range RecipientsOf(m) {
		if r != holder {
			to = append(to, r)
		}
	}
	if len(to) == 0 && th.CreatedBy != holder {
		to = []string{th.CreatedBy}
	}
	return &blockedQuestion{thread: th, holder: holder, answerers: to, m: m}, nil
}

// Attention computes the needs-attention list at now.
func (t *AttentionTracker) Attention(ctx context.Context, now time.Time, opt AttentionOptions) (*AttentionReport, error) {
	if opt.AckAge <= 0 {
		opt.AckAge = DefaultAckAge
	}
	r := &AttentionReport{Items: []AttentionItem{}, Counts: map[string]int{}}
	add := func(it AttentionItem, since string) {
		it.WaitingSince = since
		if it.WaitingOn == nil {
			it.WaitingOn = []string{}
		}
		if at, err := ParseTime(since); err == nil && now.After(at) {
			it.WaitingSeconds = int64(now.Sub(at) / time.Second)
		}
		r.Items = append(r.Items, it)
	}
	qs, err := t.blockedQuestions(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		add(AttentionItem{Kind: AttentionBlocked, ThreadID: q.thread.ThreadID, Subject: q.thread.Subject, Agent: q.holder,
			WaitingOn: q.answerers, MessageID: q.m.MessageID, Summary: q.m.Summary, Body: q.m.Body}, q.m.CreatedAt)
	}
	reqs, err := t.openRequests(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range reqs {
		add(AttentionItem{Kind: AttentionRequest, ThreadID: q.thread, Agent: q.from, WaitingOn: q.responders,
			MessageID: q.m.MessageID, Summary: q.m.Summary, Body: q.m.Body, RequestID: q.m.RequestID}, q.m.CreatedAt)
	}
	t.mu.Lock()
	for _, a := range t.asks {
		at, err := ParseTime(a.m.CreatedAt)
		if err != nil || now.Sub(at) < opt.AckAge {
			continue
		}
		add(AttentionItem{Kind: AttentionUnacknowledged, ThreadID: a.m.ThreadID, Agent: a.m.FromAgent,
			WaitingOn: slices.Clone(a.owed), MessageID: a.m.MessageID, Summary: a.m.Summary, Body: a.m.Body}, a.m.CreatedAt)
	}
	t.mu.Unlock()
	if err := t.leases(ctx, now, add); err != nil {
		return nil, err
	}
	if err := t.failedTasks(ctx, add); err != nil {
		return nil, err
	}
	// Every item names its thread's subject, read once per thread.
	subjects := map[string]string{}
	for i := range r.Items {
		it := &r.Items[i]
		if it.Subject != "" || it.ThreadID == "" {
			continue
		}
		sub, ok := subjects[it.ThreadID]
		if !ok {
			if th, err := t.bus.Thread(ctx, it.ThreadID); err == nil {
				sub = th.Subject
			}
			subjects[it.ThreadID] = sub
		}
		it.Subject = sub
	}
	slices.SortStableFunc(r.Items, func(a, b AttentionItem) int {
		return cmp.Or(strings.Compare(a.WaitingSince, b.WaitingSince), strings.Compare(a.ThreadID, b.ThreadID),
			strings.Compare(a.Kind, b.Kind))
	})
	for _, k := range AttentionKinds {
		r.Counts[k] = 0
	}
	for _, it := range r.Items {
		r.Counts[it.Kind]++
	}
	return r, nil
}

// leases adds the expired leases no one took back, and the gone agents
// that hold them. A gone agent holds no live lease (an agent with one is
// working), so Agents, which reads every open thread, is asked only when
// some lease has run out.
func (t *AttentionTracker) leases(ctx context.Context, now time.Time, add func(AttentionItem, string)) error {
	held, err := t.bus.HeldLeases(ctx)
	if err != nil {
		return fmt.Errorf("list the held leases: %w", err)
	}
	type expired struct {
		th    *Thread
		lease *Lease
	}
	var out []expired
	for _, h := range held {
		if h.ExpiresAt.After(now) {
			continue
		}
		v, err := t.bus.Show(ctx, h.ThreadID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read thread %s: %w", h.ThreadID, err)
		}
		if v.Lease == nil || v.Lease.Released() || v.Lease.Live(now) {
			continue // released or renewed meanwhile
		}
		out = append(out, expired{v.Thread, v.Lease})
		add(AttentionItem{Kind: AttentionExpiredLease, ThreadID: h.ThreadID, Subject: v.Thread.Subject, Agent: v.Lease.AgentID,
			WaitingOn: []string{}, LeaseToken: v.Lease.LeaseToken, ExpiresAt: v.Lease.ExpiresAt}, v.Lease.ExpiresAt)
	}
	if len(out) == 0 {
		return nil
	}
	agents, err := t.bus.Agents(ctx)
	if err != nil {
		return fmt.Errorf("list the agents: %w", err)
	}
	gone := map[string]bool{}
	for _, a := range agents {
		gone[a.Agent] = a.State == StateGone
	}
	for _, e := range out {
		if gone[e.lease.AgentID] {
			add(AttentionItem{Kind: AttentionGoneWithLease, ThreadID: e.th.ThreadID, Subject: e.th.Subject, Agent: e.lease.AgentID,
				WaitingOn: []string{}, LeaseToken: e.lease.LeaseToken, ExpiresAt: e.lease.ExpiresAt}, e.lease.ExpiresAt)
		}
	}
	return nil
}

// failedTasks adds the failed tasks, with their failure (remembered: a
// finished thread does not change).
func (t *AttentionTracker) failedTasks(ctx context.Context, add func(AttentionItem, string)) error {
	tasks, err := t.bus.Tasks(ctx, TaskFilter{})
	if err != nil {
		return fmt.Errorf("list the tasks: %w", err)
	}
	for _, tk := range tasks {
		if tk.Status != StatusFailed {
			continue
		}
		t.mu.Lock()
		m := t.failures[tk.ThreadID]
		t.mu.Unlock()
		if m == nil {
			_, last, err := t.bus.LastMessage(ctx, tk.ThreadID)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("read task %s's failure: %w", tk.Name, err)
			}
			m = last
			t.mu.Lock()
			t.failures[tk.ThreadID] = m
			t.mu.Unlock()
		}
		var to []string
		if tk.Parent != "" {
			to = []string{tk.Parent}
		}
		add(AttentionItem{Kind: AttentionFailedTask, ThreadID: tk.ThreadID, Agent: tk.Name, WaitingOn: to,
			MessageID: m.MessageID, Summary: m.Summary, Body: m.Body}, tk.UpdatedAt)
	}
	return nil
}
