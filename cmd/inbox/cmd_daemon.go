package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox/daemon"
)

type daemonCmd struct {
	intake, intakeTo string
	trustAll         bool
}

func (r *daemonCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.intake, "intake", "", "directory watched for NAME.task.json descriptors (default <db>/intake)")
	fs.StringVar(&r.intakeTo, "intake-to", "coordinator", "agent that prompt and spawn_worker threads are assigned to")
	fs.BoolVar(&r.trustAll, "trust-all", false, "accept spawn_worker descriptors (env INBOX_TRUST_ALL=1)")
}

func (r *daemonCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	// Signals first: a SIGINT that arrives while the daemon starts stops
	// it cleanly instead of killing it.
	ctx, stop := blockingContext()
	defer stop()
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	release, err := s.LockDaemon(fmt.Sprintf("pid %d", os.Getpid()))
	if err != nil {
		return nil, err
	}
	defer release()
	dir := r.intake
	if d, ok := s.(interface{ DefaultIntake() string }); ok && dir == "" {
		dir = d.DefaultIntake()
	}
	if dir == "" {
		return nil, usagef("intake", "--intake is required: this store has no intake directory of its own")
	}
	var h slog.Handler = slog.NewTextHandler(c.env.stderr, nil)
	if c.g.json {
		h = slog.NewJSONHandler(c.env.stderr, nil)
	}
	trust := r.trustAll || c.env.getenv("INBOX_TRUST_ALL") == "1"
	err = daemon.Run(ctx, daemon.Config{Store: s, Intake: dir, IntakeTo: r.intakeTo, TrustAll: trust,
		Log: slog.New(h), ForcePoll: c.forcePoll()})
	return nil, err
}
