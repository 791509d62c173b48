package main

import (
	"log/slog"
	"os"
	"path/filepath"

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
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	release, err := s.LockDaemon(os.Getpid())
	if err != nil {
		return nil, err
	}
	defer release()
	dir := r.intake
	if dir == "" {
		dir = filepath.Join(c.g.db, "intake")
	}
	var h slog.Handler = slog.NewTextHandler(c.env.stderr, nil)
	if c.g.json {
		h = slog.NewJSONHandler(c.env.stderr, nil)
	}
	ctx, stop := blockingContext()
	defer stop()
	trust := r.trustAll || c.env.getenv("INBOX_TRUST_ALL") == "1"
	err = daemon.Run(ctx, daemon.Config{Store: s, Intake: dir, IntakeTo: r.intakeTo, TrustAll: trust,
		Log: slog.New(h), ForcePoll: c.forcePoll()})
	return nil, err
}
