package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/daemon"
	"github.com/inbox-dev/inbox/teamfiles"
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

Team inbox files (SPEC §11): --team-dir DIR keeps seed 002's JSONL member
inboxes (DIR/{team}/members/{member}/inbox) in step with the store, both
ways: every message delivered to a team member is appended there once, and
lines others append (echo "$MESSAGE" >> inbox) are taken in once, also
across restarts; bad lines go to errors.log beside the inbox. --claude-teams
DIR does the same for Claude Code's agent teams: their members become inbox
teams, every message delivered to a member is added to its
inboxes/{member}.json with Claude Code's own locking, and what teammates
write to the bridge's inbox (inboxes/{--agent, default inbox}.json) is taken
in once and marked read. Give the directory as --claude-teams DIR or
--claude-teams=DIR; alone, --claude-teams means ~/.claude/teams. The word
after --claude-teams is its directory when it names an existing directory
or a path (it holds a /); any other word is refused, as a slip more likely
than a directory to make.

Only one daemon may serve a store; a second one exits 20.`,
	examples: []string{
		"inbox daemon",
		"inbox daemon --intake ~/.inbox-intake --intake-to coordinator --json",
		`echo '{"version":1,"kind":"prompt","prompt":"Summarise today"}' > .agents/inbox/intake/daily.tmp && mv .agents/inbox/intake/daily.tmp .agents/inbox/intake/daily.task.json`,
		"inbox daemon --team-dir ~/team-inboxes   # seed 002's DIR/{team}/members/{member}/inbox",
		"inbox daemon --claude-teams ~/.claude/teams --agent inbox",
		"inbox daemon --claude-teams   # alone: ~/.claude/teams",
	},
	new: func() runner { return &daemonCmd{} },
}

type daemonCmd struct {
	intake, intakeTo     string
	trustAll             bool
	teamDir, claudeTeams string
	teamMaxSize          int64
}

func (r *daemonCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.intake, "intake", "", "directory watched for NAME.task.json descriptors (default <db>/intake)")
	fs.StringVar(&r.intakeTo, "intake-to", "coordinator", "agent that prompt and spawn_worker threads are assigned to")
	fs.BoolVar(&r.trustAll, "trust-all", false, "accept spawn_worker descriptors (env INBOX_TRUST_ALL=1)")
	fs.StringVar(&r.teamDir, "team-dir", "", "keep seed 002's JSONL member inboxes under `DIR` ({team}/members/{member}/inbox) in step with the store")
	fs.StringVar(&r.claudeTeams, "claude-teams", "", "keep Claude Code's team inboxes under `DIR` in step with the store (--claude-teams DIR or =DIR; alone: ~/.claude/teams)")
	fs.Lookup("claude-teams").NoOptDefVal = "~/.claude/teams"
	fs.Int64Var(&r.teamMaxSize, "team-max-size", 10<<20, "rotate a JSONL member inbox past this many bytes")
	c.agentFlag("the bridge's member name in Claude Code teams (default inbox)")
}

func (r *daemonCmd) run(c *call) (*result, error) {
	if err := optionalDir(c, "claude-teams", &r.claudeTeams); err != nil {
		return nil, err
	}
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
	if isNATS(c.g.db) {
		if err := natsLockDir(c.env.getenv); err != nil {
			return nil, err
		}
	}
	release, err := s.LockDaemon(ctx, fmt.Sprintf("pid %d", os.Getpid()))
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
	log := slog.New(h)
	bridges, err := r.bridges(c, s, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(bridges))
	for _, run := range bridges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := run(ctx)
			if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
				return // the daemon stops: a bridge cut short is a clean stop
			}
			if err != nil {
				log.Error("team files bridge stopped", "error", err)
				errs <- err
				cancel()
			}
		}()
	}
	err = daemon.Run(ctx, daemon.Config{Store: s, Intake: dir, IntakeTo: r.intakeTo, TrustAll: trust,
		Log: log, ForcePoll: c.forcePoll()})
	cancel()
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
			err = inbox.Internal(err)
		default:
		}
	}
	return nil, err
}

// optionalDir gives a flag whose directory may be left out (pflag's
// NoOptDefVal: --claude-teams alone means ~/.claude/teams) the directory
// written after it with a space, which pflag leaves among the arguments.
// The word after the flag is its directory when it names an existing
// directory or a path (it holds a /); another word is refused, as a slip
// more likely than a directory to make. dir is set, and the word taken out
// of the arguments, only when the flag was given alone.
func optionalDir(c *call, flag string, dir *string) error {
	f := c.fs.Lookup(flag)
	if f == nil || !f.Changed || *dir != f.NoOptDefVal {
		return nil
	}
	for i, a := range c.raw {
		if a == "--" || i+1 == len(c.raw) {
			break
		}
		next := c.raw[i+1]
		j := slices.Index(c.args, next)
		if a != "--"+flag || strings.HasPrefix(next, "-") || j < 0 {
			continue
		}
		if fi, err := os.Stat(next); !strings.Contains(next, "/") && (err != nil || !fi.IsDir()) {
			return usagef(flag, "give the directory as --%s=%s (it is no directory here; alone, --%s means %s)", flag, next, flag, f.NoOptDefVal)
		}
		*dir = next
		c.args = slices.Delete(c.args, j, j+1)
	}
	return nil
}

// expandHome resolves a leading ~/ of a directory flag.
func expandHome(flag, dir string) (string, error) {
	rest, ok := strings.CutPrefix(dir, "~/")
	if !ok {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", usagef(flag, "--%s %s: %v", flag, dir, err)
	}
	return filepath.Join(home, rest), nil
}

// bridges returns the team-file bridges the flags ask for.
func (r *daemonCmd) bridges(c *call, s inbox.Bus, log *slog.Logger) ([]func(context.Context) error, error) {
	var out []func(context.Context) error
	if r.teamMaxSize <= 0 {
		return nil, usagef("team-max-size", "--team-max-size must be a positive number of bytes")
	}
	agent := c.g.agent
	if !c.g.agentSet {
		agent = "" // INBOX_AGENT names a worker, not the bridge
	}
	if agent != "" {
		if err := inbox.ValidateAgent("agent", agent); err != nil {
			return nil, err
		}
	}
	for _, b := range []struct {
		flag, dir string
		run       func(context.Context, teamfiles.Config) error
	}{{"team-dir", r.teamDir, teamfiles.RunJSONL}, {"claude-teams", r.claudeTeams, teamfiles.RunClaude}} {
		if b.dir == "" {
			continue
		}
		dir, err := expandHome(b.flag, b.dir)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, usagef(b.flag, "--%s %s: %v", b.flag, dir, errText(err))
		}
		cfg := teamfiles.Config{Bus: s, Dir: dir, Log: log.With("bridge", b.flag), Agent: agent, MaxSize: r.teamMaxSize, ForcePoll: c.forcePoll()}
		run := b.run
		out = append(out, func(ctx context.Context) error { return run(ctx, cfg) })
	}
	return out, nil
}

// natsLockDir makes sure that the directory where the daemon of a NATS
// store takes its lock on this machine is safe to use. The lock goes in
// $XDG_CACHE_HOME/inbox (else $HOME/.cache/inbox) when that can be made;
// else in the temp directory, as inbox-UID: a directory there may have
// been made by another user, to see or steal the lock, or to have the
// daemon write through a symlink. So it is made 0700 when missing and used
// only if it is a directory (not a symlink) of this user's that no one
// else may write to; else the daemon refuses to start, saying why. (The
// order of the choice is the store's own: natsbus's lockPath.)
func natsLockDir(getenv func(string) string) error {
	cache := ""
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		cache = filepath.Join(d, "inbox")
	} else if h := getenv("HOME"); h != "" {
		cache = filepath.Join(h, ".cache", "inbox")
	}
	if cache != "" && os.MkdirAll(cache, 0o700) == nil {
		return nil
	}
	tmp := getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	return privateDir(filepath.Join(tmp, fmt.Sprintf("inbox-%d", os.Getuid())))
}

// privateDir makes dir (0700) if it is missing and checks that it is a
// directory, not a symlink, owned by this process's user, that neither
// its group nor others may write to.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return inbox.Storage(err, "create %s for the daemon's lock", dir)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return inbox.Storage(err, "check %s for the daemon's lock", dir)
	}
	why := ""
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		why = "it is a symlink"
	case !fi.IsDir():
		why = "it is not a directory"
	case st != nil && int(st.Uid) != os.Getuid():
		why = fmt.Sprintf("it belongs to uid %d, not to you (uid %d)", st.Uid, os.Getuid())
	case fi.Mode().Perm()&0o022 != 0:
		why = fmt.Sprintf("others may write to it (mode %04o)", fi.Mode().Perm())
	}
	if why == "" {
		return nil
	}
	return &inbox.Error{Code: "unsafe_lock_dir", Err: inbox.ErrStorage,
		Rule: fmt.Sprintf("the daemon's lock directory %s is not safe to use: %s; another user may have made it. Remove it, or set XDG_CACHE_HOME to a directory of your own", dir, why)}
}
