package natsbus

// Following the stream: events, follow, and the waits (wait-reply,
// watch) that follow a subject until what they wait for arrives.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Events calls fn for each event after the id, in order.
func (b *Bus) Events(ctx context.Context, after int64, fn func(ev *inbox.Event) bool) error {
	if after < 0 {
		return inbox.Invalid("after_event", "must be 0 or more")
	}
	return b.records(ctx, b.prefix+">", uint64(after)+1, false, func(r *record, _ uint64) bool { return fn(&r.Event) })
}

// LastEventID is the id of the newest event: the stream holds events only.
func (b *Bus) LastEventID(ctx context.Context) (int64, error) {
	var info *jetstream.StreamInfo
	err := b.retry(ctx, func(ctx context.Context) (err error) {
		info, err = b.stream.Info(ctx)
		return err
	})
	if err != nil {
		return 0, inbox.Storage(err, "read the event log")
	}
	return int64(info.State.LastSeq), nil
}

// follower delivers the records of subjects from a sequence on, as the
// server stores them: a pull consumer whose fetch the server answers the
// moment a record is stored (a long poll, never a sleep loop). Fetches
// last at most two seconds; after one that brought nothing the consumer
// is asked for, and one that has gone with its server (a fail-over) is
// made again from the record expected next. (An ordered consumer was seen
// to stall for a minute across a fail-over, heartbeats notwithstanding.)
type follower struct {
	b        *Bus
	subjects []string
	from     uint64 // the sequence it expects next
	cons     jetstream.Consumer
}

func (b *Bus) follow(ctx context.Context, subject string, from uint64) (*follower, error) {
	return b.followAll(ctx, []string{subject}, from)
}

func (b *Bus) followAll(ctx context.Context, subjects []string, from uint64) (*follower, error) {
	f := &follower{b: b, subjects: subjects, from: max(from, 1)}
	if err := b.retry(ctx, func(context.Context) error { return f.start(ctx) }); err != nil {
		return nil, inbox.Storage(err, "follow the event log")
	}
	return f, nil
}

func (f *follower) start(ctx context.Context) error {
	f.close()
	ctx, cancel := f.b.ctx(ctx)
	defer cancel()
	cons, err := f.b.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{FilterSubjects: f.subjects,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: f.from, AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: inactive, MemoryStorage: true, Replicas: 1})
	if err != nil {
		return err
	}
	f.cons = cons
	return nil
}

// next waits for the next record until ctx ends or the deadline passes
// (ok false then).
func (f *follower) next(ctx context.Context, deadline time.Time) (r *record, seq uint64, ok bool, err error) {
	failing := time.Time{}
	for {
		if ctx.Err() != nil || (!deadline.IsZero() && !time.Now().Before(deadline)) {
			return nil, 0, false, nil
		}
		wait := 2 * time.Second
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		fctx, cancel := context.WithTimeout(ctx, wait)
		var msg jetstream.Msg
		var ferr error
		if f.cons == nil {
			ferr = errors.New("no consumer")
		} else {
			batch, err := f.cons.Fetch(1, jetstream.FetchContext(fctx))
			if err != nil {
				ferr = err
			} else {
				for m := range batch.Messages() {
					msg = m
				}
				if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) &&
					!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, nats.ErrTimeout) {
					ferr = err
				}
			}
		}
		cancel()
		if msg != nil {
			md, err := msg.Metadata()
			if err != nil {
				return nil, 0, false, inbox.Storage(err, "follow the event log")
			}
			r, err := decode(msg.Data(), md.Sequence.Stream)
			if err == nil {
				f.from = md.Sequence.Stream + 1
			}
			return r, md.Sequence.Stream, err == nil, err
		}
		if ferr == nil && ctx.Err() == nil && f.cons != nil {
			// Nothing came: is the consumer still there to bring it?
			ictx, icancel := f.b.ctx(ctx)
			_, ferr = f.cons.Info(ictx)
			icancel()
		}
		if ferr == nil {
			failing = time.Time{}
			continue
		}
		if failing.IsZero() {
			failing = time.Now()
		}
		if time.Since(failing) > retryFor {
			return nil, 0, false, inbox.Storage(ferr, "follow the event log")
		}
		select {
		case <-ctx.Done():
			return nil, 0, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if err := f.start(ctx); err != nil && !transient(err) {
			return nil, 0, false, inbox.Storage(err, "follow the event log")
		}
	}
}

func (f *follower) close() {
	if f.cons == nil {
		return
	}
	// Best effort, and short: a consumer whose server went away goes by
	// itself once inactive.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	f.b.stream.DeleteConsumer(ctx, f.cons.CachedInfo().Name)
	cancel()
	f.cons = nil
}

// Follow is Events that goes on waiting for new events (of thread tid
// only, when given) until ctx ends or fn returns false.
func (b *Bus) Follow(ctx context.Context, after int64, tid string, opt inbox.WaitOptions, fn func(ev *inbox.Event) bool) error {
	if after < 0 {
		return inbox.Invalid("after_event", "must be 0 or more")
	}
	subject := b.prefix + ">"
	if tid != "" {
		if err := inbox.ValidateID("thread", tid); err != nil {
			return err
		}
		subject = b.threadFilter(tid)
	}
	f, err := b.follow(ctx, subject, uint64(after)+1)
	if err != nil {
		return err
	}
	defer f.close()
	for {
		r, _, ok, err := f.next(ctx, time.Time{})
		if err != nil || !ok {
			return err
		}
		if !fn(&r.Event) {
			return nil
		}
	}
}

// WaitReply blocks until the thread has a message f matches after the
// cursor (the rules of the directory store: spool's WaitReply).
func (b *Bus) WaitReply(ctx context.Context, tid string, cur inbox.ReplyCursor, f inbox.ReplyFilter, opt inbox.WaitOptions) (*inbox.WaitResult, error) {
	w, err := inbox.NewReplyWait(tid, cur, f)
	if err != nil {
		return nil, err
	}
	if opt.Agent == "" {
		opt.Agent = cur.Agent // wait-reply --agent: that agent is waiting
	}
	deadline := time.Now().Add(opt.Timeout)
	recs, err := b.threadRecords(ctx, tid)
	if err != nil {
		return nil, err
	}
	last := recs[len(recs)-1]
	msgs := messagesOf(recs)
	if err := w.Start(replyThread{tid, last, msgs}); err != nil {
		return nil, err
	}
	found := func(m *inbox.Message) (*inbox.WaitResult, error) { return w.Answer(ctx, m, b.MarkRead) }
	if inbox.IsTerminal(last.Thread.Status) {
		if m := inbox.TerminalMessage(msgs, last.Thread.Status); m != nil {
			return found(m)
		}
	}
	for _, m := range msgs {
		if w.Matches(m) {
			return found(m)
		}
	}
	verified := max(w.AfterEvent, last.Thread.LastEventID)
	if opt.Timeout <= 0 {
		return &inbox.WaitResult{NextEventID: verified}, nil
	}
	// A holder's own wait keeps its lease (SPEC §4) while it blocks.
	if w.KeepsLease(&last.Thread, last.Lease, b.now()) {
		defer inbox.KeepLease(ctx, *last.Lease, b.now, b.Renew)()
	}
	var res *inbox.WaitResult
	err = b.waitFollowing(ctx, b.threadFilter(tid), uint64(last.Thread.LastEventID)+1, opt.Agent, deadline, func(r *record, seq uint64) (bool, error) {
		verified = max(verified, int64(seq))
		if r.Message != nil {
			msgs = append(msgs, r.Message)
			if w.Matches(r.Message) {
				var ferr error
				res, ferr = found(r.Message)
				return true, ferr
			}
		}
		if inbox.IsTerminal(r.Thread.Status) {
			if m := inbox.TerminalMessage(msgs, r.Thread.Status); m != nil {
				var ferr error
				res, ferr = found(m)
				return true, ferr
			}
		}
		return false, nil
	})
	if res == nil && err == nil {
		res = &inbox.WaitResult{NextEventID: verified}
	}
	return res, err
}

// replyThread is a thread as a wait-reply's rules see it: its last
// record and its messages when the wait began.
type replyThread struct {
	tid  string
	last *record
	msgs []*inbox.Message
}

func (t replyThread) MessageCount() int { return t.last.Thread.MessageCount }

func (t replyThread) MessageByID(id string) (*inbox.Message, error) {
	i := slices.IndexFunc(t.msgs, func(m *inbox.Message) bool { return m.MessageID == id })
	if i < 0 {
		return nil, inbox.MessageNotFound(id, t.tid)
	}
	return t.msgs[i], nil
}

func (t replyThread) ReadSeq(agent string) (int, error) {
	return t.last.Cursors[agent].LastReadSeq, nil
}

func (t replyThread) RequestSeq(requestID string) (int, error) {
	for _, m := range t.msgs {
		if m.RequestID == requestID {
			return m.Seq, nil
		}
	}
	return 0, nil
}

func (t replyThread) QuestionSeq() (int, error) {
	for i := len(t.msgs) - 1; i >= 0; i-- {
		if inbox.IsQuestion(t.msgs[i]) {
			return t.msgs[i].Seq, nil
		}
	}
	return 0, nil
}

// statusEvents are the event types that set a thread's status.
var statusEvents = []string{inbox.EventThreadCreated, inbox.EventThreadClaimed, inbox.EventThreadUpdated, inbox.EventThreadDone,
	inbox.EventThreadFailed, inbox.EventThreadCancelled, inbox.EventLeaseExpired}

// Watch blocks until a new thread is offered to agent, or a thread it is
// assigned to or created changes to one of statuses (any when empty),
// after the cursor (after, or now when nil).
func (b *Bus) Watch(ctx context.Context, agent string, statuses []string, after *int64, opt inbox.WaitOptions) (*inbox.WaitResult, error) {
	if err := inbox.PrepareWatch(agent, statuses, after); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(opt.Timeout)
	var cursor int64
	if after != nil {
		cursor = *after
	} else {
		var err error
		if cursor, err = b.LastEventID(ctx); err != nil {
			return nil, err
		}
	}
	match := func(r *record) bool {
		ev := &r.Event
		if r.Thread.Mail || !slices.Contains(statusEvents, ev.EventType) {
			return false
		}
		if len(statuses) > 0 && !slices.Contains(statuses, ev.Status) {
			return false
		}
		if ev.EventType == inbox.EventThreadCreated {
			return r.offeredTo(agent)
		}
		return r.offeredTo(agent) || r.Thread.CreatedBy == agent
	}
	result := func(r *record) *inbox.WaitResult {
		th := r.Thread
		return &inbox.WaitResult{Woke: true, NextEventID: r.Event.EventID, Event: &r.Event, Thread: &th}
	}
	scanned := cursor
	var hit *record
	err := b.records(ctx, b.prefix+"t.>", uint64(cursor)+1, false, func(r *record, seq uint64) bool {
		scanned = int64(seq)
		if match(r) {
			hit = r
			return false
		}
		return true
	})
	if err != nil || hit != nil {
		if hit != nil {
			return result(hit), nil
		}
		return nil, err
	}
	if opt.Timeout <= 0 {
		return &inbox.WaitResult{NextEventID: scanned}, nil
	}
	err = b.waitFollowing(ctx, b.prefix+"t.>", uint64(scanned)+1, agent, deadline, func(r *record, seq uint64) (bool, error) {
		scanned = int64(seq)
		if match(r) {
			hit = r
		}
		return hit != nil, nil
	})
	if err != nil {
		return nil, err
	}
	if hit == nil {
		return &inbox.WaitResult{NextEventID: scanned}, nil
	}
	return result(hit), nil
}

// waitFollowing follows subject from sequence start while agent waits
// (Waiting), handing each record to fn until fn says it is done, the
// deadline passes or ctx ends.
func (b *Bus) waitFollowing(ctx context.Context, subject string, start uint64, agent string, deadline time.Time,
	fn func(r *record, seq uint64) (bool, error)) error {
	fl, err := b.follow(ctx, subject, start)
	if err != nil {
		return err
	}
	defer fl.close()
	release := b.Waiting(ctx, agent)
	defer release()
	for {
		r, seq, ok, err := fl.next(ctx, deadline)
		if err != nil || !ok {
			return err
		}
		if done, err := fn(r, seq); done || err != nil {
			return err
		}
	}
}
