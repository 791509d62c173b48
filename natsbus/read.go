package natsbus

// Reading the stream: records of a subject, a thread's records and
// messages, every thread's current state.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// inactive is how long the server keeps a consumer its reader has gone
// quiet on (a process killed mid-read, say).
const inactive = 5 * time.Second

// errKeep ends a mutate that has nothing to change.
var errKeep = errors.New("nothing to change")

// records calls fn with every record of the stream on subject (a
// wildcard is allowed) from sequence from on, in order, until fn returns
// false or the stream has no more. lastPerSubject delivers only the
// newest record of each subject: every thread's current state.
func (b *Bus) records(ctx context.Context, subject string, from uint64, lastPerSubject bool, fn func(r *record, seq uint64) bool) error {
	return b.recordsOf(ctx, []string{subject}, from, lastPerSubject, fn)
}

// recordsOf is records on several subjects at once.
func (b *Bus) recordsOf(ctx context.Context, subjects []string, from uint64, lastPerSubject bool, fn func(r *record, seq uint64) bool) error {
	var next uint64 // after a fail-over, go on from here
	err := b.retry(ctx, func(context.Context) error {
		start := from
		if next > 0 && !lastPerSubject {
			start = next
		}
		return b.readRecords(ctx, subjects, start, lastPerSubject, func(r *record, seq uint64) bool {
			if seq < next {
				return true // delivered before the fail-over
			}
			next = seq + 1
			return fn(r, seq)
		})
	})
	if err != nil {
		return inbox.Storage(err, "read the event log")
	}
	return nil
}

// readRecords is one attempt of recordsOf.
func (b *Bus) readRecords(ctx context.Context, subjects []string, from uint64, lastPerSubject bool, fn func(r *record, seq uint64) bool) error {
	rctx, cancel := b.ctx(ctx) // for the requests; each fetch has its own wait
	defer cancel()
	// A plain ephemeral pull consumer, not an ordered one: an ordered
	// consumer that lost its server recreates itself inside Fetch, and
	// a fetch was seen to wait there for minutes. A fetch that gets
	// nothing it was owed fails instead, and the read starts again from
	// where it got (recordsOf).
	cfg := jetstream.ConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: inactive, MemoryStorage: true, Replicas: 1}
	switch {
	case lastPerSubject:
		cfg.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	case from > 1:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := b.stream.CreateConsumer(rctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		// Done with it: the server need not keep it until it times out.
		dctx, dcancel := b.ctx(ctx)
		b.stream.DeleteConsumer(dctx, cons.CachedInfo().Name)
		dcancel()
	}()
	info := cons.CachedInfo()
	pending := uint64(0)
	if info != nil {
		pending = info.NumPending
	}
	for got := uint64(0); got < pending; {
		batch, err := cons.Fetch(int(min(pending-got, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			r, err := decode(m.Data(), md.Sequence.Stream)
			if err != nil {
				return err
			}
			if !fn(r, md.Sequence.Stream) {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return err
		}
		if n == 0 {
			return nats.ErrTimeout // the server owes messages it counted: try again
		}
		got += uint64(n)
	}
	return nil
}

// threadRecords lists a thread's records in order.
func (b *Bus) threadRecords(ctx context.Context, tid string) ([]*record, error) {
	var out []*record
	err := b.records(ctx, b.threadFilter(tid), 1, false, func(r *record, _ uint64) bool {
		out = append(out, r)
		return true
	})
	if err == nil && len(out) == 0 {
		return nil, inbox.NotFound("thread %s not found", tid)
	}
	return out, err
}

func messagesOf(recs []*record) []*inbox.Message {
	var out []*inbox.Message
	for _, r := range recs {
		if r.Message != nil {
			out = append(out, r.Message)
		}
	}
	return out
}

// messageAt returns message seq of a thread.
func (b *Bus) messageAt(ctx context.Context, tid string, seq int) (*inbox.Message, error) {
	recs, err := b.threadRecords(ctx, tid)
	if errors.Is(err, inbox.ErrNotFound) {
		if old, aerr := b.archived(ctx, tid); aerr == nil && len(old) > 0 {
			recs, err = old, nil
		}
	}
	if err != nil {
		return nil, err
	}
	for _, m := range messagesOf(recs) {
		if m.Seq == seq {
			return m, nil
		}
	}
	return nil, inbox.NotFound("message %d of thread %s not found", seq, tid)
}

// threads calls fn with every thread's current state.
// (Each thread has one subject per recipient and actor, each with its own
// last record: the newest of them is the thread's state.)
func (b *Bus) threads(ctx context.Context, fn func(r *record) bool) error {
	newest := map[string]*record{}
	err := b.records(ctx, b.prefix+"t.>", 1, true, func(r *record, _ uint64) bool {
		if o := newest[r.Thread.ThreadID]; o == nil || o.Event.EventID < r.Event.EventID {
			newest[r.Thread.ThreadID] = r
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, r := range newest {
		if !fn(r) {
			break
		}
	}
	return nil
}

// states reads the threads' current states, several requests in flight at
// once (a request's time is mostly the round trip); nil for a thread that
// does not exist.
func (b *Bus) states(ctx context.Context, tids []string) ([]*record, error) {
	out := make([]*record, len(tids))
	errs := make([]error, len(tids))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, tid := range tids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, _, err := b.state(ctx, tid)
			if !errors.Is(err, inbox.ErrNotFound) {
				out[i], errs[i] = r, err
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
