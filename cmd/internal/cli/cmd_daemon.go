package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox/daemon"
)

var daemonCommand = &command{
	name: "daemon", short: "serve the intake directory and expire leases (long-running)",
	long: `Run in the foreground until SIGINT or SIGTERM. The daemon turns every
NAME.task.json descriptor dropped into --intake (default <db>/intake) into a
thread, then writes NAME.task.json.result and renames the descriptor to
.processed (or .failed, with the reason in .result); when the thread reaches
done, failed or cancelled it writes NAME.task.json.outcome with the final
status and the last message. It also releases expired leases (lease_expired
events) so those threads can be claimed again. Other file names are ignored.

Descriptors ("version":1): {"kind":"prompt","prompt":…} makes a task thread
for --intake-to; {"kind":"send",…} carries the fields of inbox send (from, to,
subject, thread, run_id, task_id, message_kind, summary, body, payload,
priority, artifacts); {"kind":"spawn_worker","agent_type":…,"name":…,"prompt":…}
is refused unless --trust-all. Write descriptors to a temp name and rename
them into place. Logs are structured lines on stderr (JSON with --json).

Only one daemon may serve a store; a second one exits 20.`,
	examples: []string{
		"inbox daemon",
		"inbox daemon --intake ~/.inbox-intake --intake-to coordinator --json",
		`echo '{"version":1,"kind":"prompt","prompt":"Summarise today"}' > .agents/inbox/intake/daily.tmp && mv .agents/inbox/intake/daily.tmp .agents/inbox/intake/daily.task.json`,
	},
	new: func() runner { return &daemonCmd{} },
}

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
	ctx, stop := c.blockingContext()
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
