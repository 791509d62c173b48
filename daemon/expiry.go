package daemon

import (
	"container/heap"
	"context"
	"errors"
	"time"

	"github.com/inbox-dev/inbox"
)

// seedLeases schedules every held lease's expiry.
func (d *daemon) seedLeases(ctx context.Context) error {
	held, err := d.s.HeldLeases(ctx)
	if err != nil {
		return err
	}
	for _, l := range held {
		d.schedule(l.ThreadID, l.ExpiresAt)
	}
	return nil
}

// schedule adds thread tid's lease, due at t, to the expiry schedule. A
// lease renewed or claimed again is scheduled again; its earlier entry
// finds it not yet expired (ExpireLease reports false).
func (d *daemon) schedule(tid string, t time.Time) {
	heap.Push(&d.leases, expiry{tid: tid, at: t})
}

// expire releases every lease that is due.
func (d *daemon) expire(ctx context.Context) {
	now := time.Now()
	for d.leases.Len() > 0 && !d.leases[0].at.After(now) {
		e := heap.Pop(&d.leases).(expiry)
		ok, err := d.s.ExpireLease(ctx, e.tid)
		switch {
		case err != nil && !errors.Is(err, inbox.ErrNotFound):
			d.log.Error("cannot expire lease", "thread", e.tid, "error", err)
		case ok:
			d.log.Info("lease expired", "thread", e.tid)
		}
	}
}

// untilNext is how long until the next due lease or deferred sweep.
func (d *daemon) untilNext() time.Duration {
	next := time.Hour
	if d.leases.Len() > 0 {
		next = min(next, time.Until(d.leases[0].at)+time.Millisecond)
	}
	if !d.resweep.IsZero() {
		next = min(next, time.Until(d.resweep)+time.Millisecond)
	}
	return max(next, time.Millisecond)
}

type expiry struct {
	tid string
	at  time.Time
}

type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
