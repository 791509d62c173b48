package natsbus

import (
	"context"
	"encoding/json"

	"github.com/inbox-dev/inbox"
)

// SendBatch sends each input in turn: on JetStream every thread's
// creation is its own compare-and-set, so there is no one commit to share.
func (b *Bus) SendBatch(ctx context.Context, ins []inbox.SendInput) ([]*inbox.Result, []error, error) {
	results, errs := make([]*inbox.Result, len(ins)), make([]error, len(ins))
	for i, in := range ins {
		if in.ThreadID != "" {
			errs[i] = inbox.Invalid("thread", "must be empty: SendBatch only creates threads")
			continue
		}
		results[i], errs[i] = b.Send(ctx, in)
	}
	return results, errs, nil
}

// HeldLeases lists the unreleased leases of unfinished threads.
func (b *Bus) HeldLeases(ctx context.Context) ([]inbox.LeaseExpiry, error) {
	var out []inbox.LeaseExpiry
	err := b.threads(ctx, func(r *record) bool {
		l := r.Lease
		if l == nil || l.Released() || inbox.IsTerminal(r.Thread.Status) {
			return true
		}
		if exp, err := inbox.ParseTime(l.ExpiresAt); err == nil {
			out = append(out, inbox.LeaseExpiry{ThreadID: r.Thread.ThreadID, ExpiresAt: exp})
		}
		return true
	})
	return out, err
}

// ExpireLease releases a thread's lease if it has expired, as the
// directory store does (spool's ExpireLease).
func (b *Bus) ExpireLease(ctx context.Context, tid string) (bool, error) {
	_, err := b.mutate(ctx, tid, func(c *change) error {
		l := c.r.Lease
		t := &c.r.Thread
		if l == nil || l.Released() || inbox.IsTerminal(t.Status) || l.Live(c.now) {
			return errKeep
		}
		old := *l
		l.Release(l.ExpiresAt)
		from := t.Status
		if from != inbox.StatusBlocked {
			t.Status = inbox.StatusPending
			if len(t.Recipients) > 0 {
				t.AssignedTo = ""
			}
		}
		data, _ := json.Marshal(struct {
			Agent   string `json:"agent_id"`
			Token   int64  `json:"lease_token"`
			Expired string `json:"expired_at"`
			From    string `json:"from"`
			To      string `json:"to"`
		}{old.AgentID, old.LeaseToken, old.ExpiresAt, from, t.Status})
		c.r.Event = inbox.Event{EventType: inbox.EventLeaseExpired, Agent: old.AgentID,
			Summary: "lease of " + old.AgentID + " expired", PayloadJSON: data}
		return nil
	})
	if err == errKeep {
		return false, nil
	}
	return err == nil, err
}
