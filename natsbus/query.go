package natsbus

// Queries on threads: fetch, list, show.

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/inbox-dev/inbox"
)

// Fetch lists the threads waiting for agent, high priority first, then
// oldest; like the directory store, a claimed thread whose lease ran out
// counts as pending.
func (b *Bus) Fetch(ctx context.Context, agent string, statuses []string, limit int, unread bool) ([]*inbox.Thread, error) {
	statuses, err := inbox.PrepareFetch(agent, statuses, limit)
	if err != nil {
		return nil, err
	}
	now := b.now()
	var out []*inbox.Thread
	tids, err := b.indexed(ctx, agent)
	if err != nil {
		return nil, err
	}
	states, err := b.states(ctx, tids)
	if err != nil {
		return nil, err
	}
	for _, r := range states {
		if r == nil {
			continue // an entry whose thread never committed
		}
		if !r.offeredTo(agent) || r.Thread.Mail {
			continue
		}
		if r.Lease.Live(now) && r.Lease.AgentID != agent {
			continue
		}
		t := r.view(now)
		pendingAgain := t.LeaseExpired && slices.Contains(statuses, inbox.StatusPending)
		if !slices.Contains(statuses, t.Status) && !pendingAgain {
			continue
		}
		if unread && !r.unread(agent) {
			continue
		}
		out = append(out, t)
	}
	slices.SortStableFunc(out, func(x, y *inbox.Thread) int {
		if c := inbox.PriorityRank(x.Priority) - inbox.PriorityRank(y.Priority); c != 0 {
			return c
		}
		return cmp.Compare(x.ThreadID, y.ThreadID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	if out == nil {
		out = []*inbox.Thread{}
	}
	return out, nil
}

// unread reports whether the thread has a message from someone other than
// agent past agent's read cursor.
func (r *record) unread(agent string) bool {
	seen := r.Cursors[agent].LastReadSeq
	for from, seq := range r.From {
		if from != agent && seq > seen {
			return true
		}
	}
	return false
}

// List returns the threads f selects, newest first.
func (b *Bus) List(ctx context.Context, f inbox.ListFilter) ([]*inbox.Thread, error) {
	statuses, err := inbox.PrepareList(f)
	if err != nil {
		return nil, err
	}
	now := b.now()
	var out []*inbox.Thread
	err = b.threads(ctx, func(r *record) bool {
		if !f.Selects(&r.Thread, statuses) {
			return true
		}
		out = append(out, r.view(now))
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(x, y *inbox.Thread) int { return cmp.Compare(y.ThreadID, x.ThreadID) })
	if len(out) > f.Limit {
		out = out[:f.Limit]
	}
	if out == nil {
		out = []*inbox.Thread{}
	}
	return out, nil
}

// Show returns a thread with every message in order.
func (b *Bus) Show(ctx context.Context, tid string) (*inbox.ThreadView, error) {
	if err := inbox.ValidateID("thread", tid); err != nil {
		return nil, err
	}
	recs, err := b.threadRecords(ctx, tid)
	archived := false
	if errors.Is(err, inbox.ErrNotFound) {
		if old, aerr := b.archived(ctx, tid); aerr == nil && len(old) > 0 {
			recs, err, archived = old, nil, true
		}
	}
	if err != nil {
		return nil, err
	}
	last := recs[len(recs)-1]
	msgs := messagesOf(recs)
	if msgs == nil {
		msgs = []*inbox.Message{}
	}
	return &inbox.ThreadView{Thread: last.view(b.now()), Messages: msgs, Lease: last.Lease, Origin: last.Origin, Archived: archived}, nil
}

// Thread returns one thread's current state.
func (b *Bus) Thread(ctx context.Context, tid string) (*inbox.Thread, error) {
	if err := inbox.ValidateID("thread", tid); err != nil {
		return nil, err
	}
	r, _, err := b.state(ctx, tid)
	if errors.Is(err, inbox.ErrNotFound) {
		if old, aerr := b.archived(ctx, tid); aerr == nil && len(old) > 0 {
			r, err = old[len(old)-1], nil
		}
	}
	if err != nil {
		return nil, err
	}
	return r.view(b.now()), nil
}

// LastMessage returns a thread and its newest message.
func (b *Bus) LastMessage(ctx context.Context, tid string) (*inbox.Thread, *inbox.Message, error) {
	v, err := b.Show(ctx, tid)
	if err != nil {
		return nil, nil, err
	}
	if len(v.Messages) == 0 {
		return v.Thread, nil, inbox.NotFound("thread %s has no message", tid)
	}
	return v.Thread, v.Messages[len(v.Messages)-1], nil
}
