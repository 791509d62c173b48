// Package migrate copies a store from one backend to another: the glue
// between spool's history and natsbus's import, kept out of both.
package migrate

import (
	"context"
	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/natsbus"
	"github.com/inbox-dev/inbox/spool"
)

// ToNATS copies history (a directory store's) into the new NATS store to.
func ToNATS(ctx context.Context, history func(fn func(*inbox.HistoryEntry) error) error, collected map[string][]int64, to string) (map[string]any, error) {
	r, err := natsbus.Import(ctx, to, history, collected)
	if err != nil {
		return nil, err
	}
	return map[string]any{"events": r.Events, "first_event_id": r.FirstEventID, "last_event_id": r.LastEventID,
		"threads": r.Threads, "teams": r.Teams, "tasks": r.Tasks, "idempotency_keys": r.Keys, "collected": r.Collected}, nil
}

// ToDir copies the NATS store from, with its history, into the new
// directory store to.
func ToDir(ctx context.Context, from, to string) (map[string]any, error) {
	b, err := natsbus.Open(ctx, from, natsbus.Options{})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	collected, err := b.Collected(ctx)
	if err != nil {
		return nil, err
	}
	n, err := spool.Import(ctx, to, func(fn func(*inbox.HistoryEntry) error) error { return b.History(ctx, fn) }, collected)
	if err != nil {
		return nil, err
	}
	c := 0
	for _, ids := range collected {
		c += len(ids)
	}
	return map[string]any{"events": n, "collected": c}, nil
}
