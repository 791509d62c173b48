package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/spool"
)

var migrateCommand = &command{
	name: "migrate", short: "copy a store, with its history, between a directory and NATS",
	long: `Copy the store --from into --to, a store that must not exist yet, with its
history: every event under its own event id, every thread with its
messages, leases, read cursors and idempotency keys, the teams, the tasks,
and which mail each agent has collected. One of the two is a directory, the
other a NATS store (nats://HOST:PORT/NAME). Agents then point INBOX_DB at
--to and carry on where they were.

Stop writers first (the daemon, running agents): events written during the
copy are not in it. Archived threads stay in the directory they were
archived in.`,
	examples: []string{
		"inbox migrate --from .agents/inbox --to nats://nats.example:4222/myteam?replicas=3",
		"inbox migrate --from nats://nats.example:4222/myteam --to .agents/inbox-copy",
	},
	new: func() runner { return &migrateCmd{} },
}

// MigrateToNATS copies a directory store's history into a new NATS store,
// and MigrateFromNATS a NATS store's into a new directory, when this
// binary links the NATS backend.
var (
	MigrateToNATS   func(ctx context.Context, history func(fn func(*inbox.HistoryEntry) error) error, collected map[string][]int64, to string) (map[string]any, error)
	MigrateFromNATS func(ctx context.Context, from, to string) (map[string]any, error)
)

type migrateCmd struct{ from, to string }

func (r *migrateCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.from, "from", "", "the store to copy: a directory, or nats://HOST:PORT/NAME (required)")
	fs.StringVar(&r.to, "to", "", "the new store: nats://HOST:PORT/NAME, or a directory (required)")
}

func (r *migrateCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	switch {
	case r.from == "":
		return nil, usagef("from", "--from is required: the store to copy")
	case r.to == "":
		return nil, usagef("to", "--to is required: the new store to copy into")
	case isNATS(r.from) == isNATS(r.to):
		return nil, usagef("to", "--from and --to must be one directory and one NATS store (nats://HOST:PORT/NAME)")
	}
	if MigrateToNATS == nil || MigrateFromNATS == nil {
		return nil, handOver(c)
	}
	if isNATS(r.from) {
		abs, err := absDB(r.to)
		if err != nil {
			return nil, usagef("to", "%v", err)
		}
		got, err := MigrateFromNATS(c.ctx, r.from, abs)
		if err != nil {
			return nil, err
		}
		res := &result{}
		res.set("from", r.from).set("to", abs).set("events", got["events"]).set("collected", got["collected"])
		res.human = func(w io.Writer) {
			fmt.Fprintf(w, "copied %v events and %v collected messages into %s\n", got["events"], got["collected"], abs)
		}
		return res, nil
	}
	src, err := spool.Open(c.ctx, r.from, spool.Options{})
	if err != nil {
		return nil, err
	}
	collected, err := src.Collected()
	if err != nil {
		return nil, err
	}
	got, err := MigrateToNATS(c.ctx, src.History, collected, r.to)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("from", r.from).set("to", r.to)
	for _, k := range []string{"events", "first_event_id", "last_event_id", "threads", "teams", "tasks", "idempotency_keys", "collected"} {
		res.set(k, got[k])
	}
	res.set("archived_left_behind", src.Archived())
	res.human = func(w io.Writer) {
		fmt.Fprintf(w, "copied %v events (%v to %v): %v threads, %v teams, %v tasks, %v idempotency keys, %v collected messages\n",
			got["events"], got["first_event_id"], got["last_event_id"], got["threads"], got["teams"], got["tasks"], got["idempotency_keys"], got["collected"])
		if src.Archived() {
			fmt.Fprintf(w, "archived threads stay in %s\n", r.from)
		}
	}
	return res, nil
}
