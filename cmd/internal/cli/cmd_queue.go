package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/queue"
)

var pushCommand = &command{
	name: "push", args: "[name=NAME] [model=MODEL] [timeout=SECONDS] PROMPT", short: "queue a task for a sub-agent (returns at once)",
	long: `Queue a task: PROMPT (the words after the flags, or - to read stdin) is what
the sub-agent is asked to do. --name is the task's name and the sub-agent's
agent name (generated and unique when omitted); --parent is who gets its
result (default --agent, else main). Nothing runs until "inbox run".

Seed 003's words work too: leading name=NAME, model=MODEL and
timeout=SECONDS words are --name, --model and --timeout-seconds. The first
other word starts the prompt (a word such as priority=high is part of
it); -- ends the options, for a prompt that starts with name=, model= or
timeout=.`,
	examples: []string{
		`inbox push --name research "Research the API and summarise the auth flow"`,
		`inbox push --timeout-seconds 300 --model fast "Refactor file1.c"`,
		`inbox push name=a model=fast timeout=300 "Research approach A"`,
	},
	new: func() runner { return &pushCmd{} },
}

type pushCmd struct {
	name, parent, model string
	timeout             int
}

func (r *pushCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("whose queue the task joins: you (env INBOX_AGENT; inside a task, its name; else main)")
	fs.StringVar(&r.name, "name", "", "the task's name, also its agent name (default: generated, unique)")
	fs.StringVar(&r.parent, "parent", "", "who gets the result in its mailbox (default: you, the pusher)")
	fs.StringVar(&r.model, "model", "", "model hint, passed to the task as INBOX_MODEL")
	fs.IntVar(&r.timeout, "timeout-seconds", 0, "kill the task's process group after this long (0: no limit)")
}

// seedWords are seed 003's option words of push (name=a), by the flag
// each stands for.
var seedWords = map[string]string{"name": "name", "model": "model", "timeout": "timeout-seconds"}

// seedOptions takes seed 003's leading option words (seedWords), before
// any --, off push's arguments and returns the rest: the prompt. The
// first other word (one without "=", with a key of no option, or with
// white space in it) starts the prompt.
func (r *pushCmd) seedOptions(c *call) ([]string, error) {
	args, dash := c.args, c.fs.ArgsLenAtDash()
	given := map[string]bool{}
	i := 0
	for ; i < len(args) && (dash < 0 || i < dash); i++ {
		key, val, ok := strings.Cut(args[i], "=")
		flag := seedWords[key]
		if !ok || flag == "" || strings.ContainsFunc(args[i], unicode.IsSpace) {
			break
		}
		if c.fs.Changed(flag) || given[flag] {
			return nil, usagef(flag, "%s= gives the task's %s a second time: give it once, as --%s or as %s=", key, key, flag, key)
		}
		given[flag] = true
		if val == "" {
			return nil, usagef(flag, "%s= needs a value, as in %s=%s", key, key, map[string]string{"name": "NAME", "model": "MODEL", "timeout": "SECONDS"}[key])
		}
		switch key {
		case "name":
			r.name = val
		case "model":
			r.model = val
		case "timeout":
			n, err := strconv.Atoi(val)
			if err != nil {
				return nil, usagef(flag, "timeout=%s must be a whole number of seconds (timeout=300: kill the task after 5 minutes)", val)
			}
			r.timeout = n
		}
	}
	return args[i:], nil
}

func (r *pushCmd) run(c *call) (*result, error) {
	words, err := r.seedOptions(c)
	if err != nil {
		return nil, err
	}
	prompt := strings.Join(words, " ")
	if prompt == "-" {
		data, err := io.ReadAll(io.LimitReader(c.env.stdin, inbox.MaxBodyLen+1))
		if err != nil {
			return nil, usagef("prompt", "reading the prompt from stdin: %v", err)
		}
		prompt = string(data)
	}
	if strings.TrimSpace(prompt) == "" {
		// The prompt is positional: inbox.PrepareTask's "--prompt" would
		// name a flag push does not have.
		return nil, usagef("prompt", "PROMPT is required: give the task's prompt after the flags, or - to read it from stdin")
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	t, err := s.Push(c.ctx, inbox.TaskSpec{Name: r.name, Owner: c.mailAgent(), Parent: r.parent, Model: r.model, TimeoutSeconds: r.timeout}, prompt)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("task", taskView(t, time.Now()))
	if r.parent != "" {
		res.warn(c, s.UnknownAgentWarnings(c.ctx, "parent", r.parent))
	}
	res.human = func(w io.Writer) {
		to := ""
		if t.Parent != t.Owner {
			to = ", result to " + t.Parent
		}
		fmt.Fprintf(w, "queued task %s in %s's queue%s (%s)\n", t.Name, t.Owner, to, t.ThreadID)
	}
	return res, nil
}

// taskView is a task as queue, push and run print it.
func taskView(t *inbox.Task, now time.Time) map[string]any {
	v := map[string]any{"name": t.Name, "owner": t.Owner, "parent": t.Parent, "thread_id": t.ThreadID, "state": t.State(),
		"status": t.Status, "created_at": t.CreatedAt}
	if t.Model != "" {
		v["model"] = t.Model
	}
	if t.TimeoutSeconds > 0 {
		v["timeout_seconds"] = t.TimeoutSeconds
	}
	if t.State() == "running" && t.StartedAt != "" {
		v["started_at"] = t.StartedAt
		if st, err := time.Parse(time.RFC3339Nano, t.StartedAt); err == nil {
			v["age_seconds"] = int(now.Sub(st).Seconds())
		}
	}
	if t.State() == "finished" {
		v["success"] = t.Status == inbox.StatusDone
		v["finished_at"] = t.UpdatedAt
	}
	return v
}

var runCommand = &command{
	name: "run", args: "[N]", short: "start the queued tasks, N at a time (returns at once)",
	long: `Start your queued tasks (all of them at once, or N at a time) and return as
soon as the tasks started show as running in "inbox queue" (JSON: "running";
"started" also names those that start as a slot frees). Each task starts
exactly once, however many runs race (two shells, an MCP run beside this
one): a task another run started is passed over, and a task that started
is never started again. A detached runner runs each as "sh -c CMD" in its own process group,
with the prompt on stdin and INBOX_TASK_NAME (also INBOX_AGENT),
INBOX_THREAD, INBOX_PARENT, INBOX_MODEL and INBOX_DB set, so the task can
use inbox itself (send progress to its parent, push sub-tasks). The runner
survives the calling shell. A task starts with your umask (not a shared
store's 007). A NATS store's password is never in a task's environment:
INBOX_DB names the store without it, and INBOX_NATS_PASSWORD_FILE a file
only you can read, which the runner removes when its tasks are done.

When a task exits 0 its stdout is delivered to the parent's mailbox as a
result message from the task's name. When it fails, or passes its
--timeout-seconds (its whole process group is killed), the message's
payload is {"success":false,"error":…,"partial_output":…}. A task whose
runner dies (kill -9) is reported failed the same way by the next queue,
run, receive or check, never run again. Collect results with receive or
check.`,
	examples: []string{
		`inbox run --exec 'claude -p "$(cat)"'`,
		`INBOX_EXEC='./agent.sh' inbox run 2`,
	},
	new: func() runner { return &runCmd{} },
}

type runCmd struct {
	exec    string
	timeout int
}

func (r *runCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("whose queue to run: yours (env INBOX_AGENT; inside a task, its name; else main)")
	fs.StringVar(&r.exec, "exec", "", "command that runs one task: sh -c CMD, prompt on stdin (env INBOX_EXEC)")
	fs.IntVar(&r.timeout, "timeout-seconds", 0, "kill the process group of a task pushed without a timeout after this long (0: no limit)")
}

func (r *runCmd) run(c *call) (*result, error) {
	if len(c.args) > 1 {
		return nil, usagef("", "inbox run takes at most one argument, N (how many at a time)")
	}
	n := 0
	if len(c.args) == 1 {
		v, err := strconv.Atoi(c.args[0])
		if err != nil || v < 1 {
			return nil, usagef("N", "N %q must be a positive number: how many tasks run at a time", c.args[0])
		}
		n = v
	}
	command := r.exec
	if command == "" {
		command = c.env.getenv("INBOX_EXEC")
	}
	if strings.TrimSpace(command) == "" {
		return nil, usagef("exec", "--exec is required (or set INBOX_EXEC): the command that runs a task")
	}
	if r.timeout < 0 || r.timeout > inbox.MaxLeaseSecs {
		return nil, usagef("timeout-seconds", "--timeout-seconds %d is out of range: give 0 (no limit) to %d", r.timeout, inbox.MaxLeaseSecs)
	}
	owner, s, tasks, err := c.queueTasks(false)
	if err != nil {
		return nil, err
	}
	// The tasks that start now (all, or the first n) start here, before
	// run returns, so that queue shows them running; the rest are the
	// runner's to start as a slot frees. A task another run started
	// meanwhile is passed over: each starts once (queue.Start).
	def := time.Duration(r.timeout) * time.Second
	started := map[string]queue.Started{}
	var running, later []string
	var startErr error
	for _, t := range tasks {
		switch {
		case t.State() != "queued":
		case startErr != nil || n > 0 && len(running) >= n:
			later = append(later, t.Name)
		default:
			st, ok, err := queue.Start(c.ctx, s, t, def)
			switch {
			case err != nil:
				startErr = err
				later = append(later, t.Name) // the runner tries again
			case ok:
				started[t.Name] = st
				running = append(running, t.Name)
			}
		}
	}
	if len(running) == 0 && startErr != nil {
		return nil, startErr
	}
	res := &result{}
	if len(running) == 0 {
		res.set("started", []string{}).set("running", []string{}).set("concurrency", n)
		res.exit = exitNoWork
		res.human = func(io.Writer) { fmt.Fprintf(c.env.stderr, "inbox: no queued tasks in %s's queue\n", owner) }
		return res, nil
	}
	names := append(slices.Clone(running), later...)
	pid, err := startRunner(s, c.g.db, c.env.getenv, n, r.timeout, command, names, started)
	if err != nil {
		// Started, and nothing will run them: their parents hear.
		for _, t := range tasks {
			if st, ok := started[t.Name]; ok {
				queue.Abandon(c.ctx, s, t, st.Token, "the runner could not be started: "+err.Error())
			}
		}
		return nil, err
	}
	res.set("started", names).set("running", running).set("concurrency", n).set("runner_pid", pid)
	res.human = func(w io.Writer) {
		at := "all at once"
		if n > 0 && n < len(names) {
			at = fmt.Sprintf("%d at a time", n)
		}
		fmt.Fprintf(w, "running %s %s (runner pid %d): %s\n", plural(len(names), "task"), at, pid, strings.Join(names, " "))
	}
	return res, nil
}

// Executable is the inbox binary this process is (a runner is started
// from it); tests that run commands in-process point it at the installed
// binary.
var Executable = os.Executable

// startRunner starts a detached runner (a new session, no terminal, its
// own process group) that outlives this command and the calling shell.
// A NATS store's secret (SPEC §8) goes to it in its environment, never in
// its argv: it may outlive the file this command found it in (a task's).
func startRunner(s inbox.Bus, db string, getenv func(string) string, n, timeout int, command string, names []string, started map[string]queue.Started) (int, error) {
	self, err := Executable()
	if err != nil {
		return 0, fmt.Errorf("cannot find the inbox binary to start a runner: %w", err)
	}
	db, err = absDB(db)
	if err != nil {
		return 0, err
	}
	secret, err := inbox.NATSSecret(getenv)
	if err != nil {
		return 0, err
	}
	db, cred := inbox.SplitNATSURL(db, secret)
	environ := inbox.WithoutEnv(os.Environ(), inbox.EnvNATSPassword, inbox.EnvNATSPasswordFile)
	if s := cred.Secret(); s != "" {
		environ = append(environ, inbox.EnvNATSPassword+"="+s)
	}
	// The runner's tasks start with this process's umask as it started,
	// not as a group-shared store left it (007), which the runner would
	// inherit.
	args := []string{"__runner", "--db", db, "--concurrency", strconv.Itoa(n), "--timeout-seconds", strconv.Itoa(timeout),
		"--umask", queue.StartUmask(), "--exec", command}
	for _, name := range names {
		if st, ok := started[name]; ok {
			args = append(args, "--started", name+"="+st.ThreadID+":"+strconv.FormatInt(st.Token, 10))
		}
	}
	args = append(append(args, "--"), names...)
	cmd := exec.Command(self, args...)
	cmd.Env = environ
	if l, ok := s.(interface{ RunnerLog() string }); ok {
		logf, err := os.OpenFile(l.RunnerLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err == nil {
			defer logf.Close()
			cmd.Stdout, cmd.Stderr = logf, logf
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start the runner: %w", err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	return pid, nil
}

var runnerCommand = &command{
	name: "__runner", hidden: true, short: "internal: the detached task runner",
	new: func() runner { return &runnerCmd{} },
}

type runnerCmd struct {
	concurrency, timeout int
	exec, umask          string
	started              []string // NAME=THREAD:TOKEN: started by run (queue.Start)
}

func (r *runnerCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringArrayVar(&r.started, "started", nil, "")
	fs.IntVar(&r.concurrency, "concurrency", 0, "")
	fs.IntVar(&r.timeout, "timeout-seconds", 0, "")
	fs.StringVar(&r.exec, "exec", "", "")
	fs.StringVar(&r.umask, "umask", "", "")
}

func (r *runnerCmd) run(c *call) (*result, error) {
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	ctx, stop := c.blockingContext()
	defer stop()
	secret, err := inbox.NATSSecret(c.env.getenv)
	if err != nil {
		return nil, err
	}
	started := map[string]queue.Started{}
	for _, v := range r.started {
		name, rest, _ := strings.Cut(v, "=")
		tid, tok, _ := strings.Cut(rest, ":")
		token, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || name == "" || tid == "" {
			return nil, usagef("started", "--started %q is not NAME=THREAD:TOKEN", v)
		}
		started[name] = queue.Started{ThreadID: tid, Token: token}
	}
	log := slog.New(slog.NewTextHandler(c.env.stderr, nil)).With("runner", os.Getpid())
	return nil, queue.Run(ctx, queue.Config{Store: s, DB: c.g.db, Exec: r.exec, Concurrency: r.concurrency,
		Tasks: c.args, Started: started, Log: log, DefaultTimeout: time.Duration(r.timeout) * time.Second, Umask: r.umask,
		Secret: secret, SecretDir: c.env.getenv("XDG_RUNTIME_DIR")})
}

// queueTasks lists the tasks in the caller's queue (every queue with
// all), after failing those whose runner died.
func (c *call) queueTasks(all bool) (string, inbox.Bus, []*inbox.Task, error) {
	owner := c.mailAgent()
	if err := inbox.ValidateAgent("agent", owner); err != nil {
		return "", nil, nil, err
	}
	f := inbox.TaskFilter{Owner: owner}
	if all {
		f.Owner = ""
	}
	s, err := c.open()
	if err != nil {
		return "", nil, nil, err
	}
	tasks, err := s.Tasks(c.ctx, f)
	if err != nil {
		return "", nil, nil, err
	}
	if reaped, _ := queue.Reap(c.ctx, s, tasks); len(reaped) > 0 {
		if tasks, err = s.Tasks(c.ctx, f); err != nil {
			return "", nil, nil, err
		}
	}
	return owner, s, tasks, nil
}

var queueCommand = &command{
	name: "queue", short: "show queued, running and finished tasks",
	long: `Show your tasks: queued (pushed, not started), running (with how long ago
they started) and finished (done or failed). Results themselves arrive in
your mailbox.`,
	examples: []string{"inbox queue", "inbox queue --json"},
	new:      func() runner { return &queueCmd{} },
}

type queueCmd struct{ all bool }

func (r *queueCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("whose queue to show: yours (env INBOX_AGENT; inside a task, its name; else main)")
	fs.BoolVar(&r.all, "all", false, "show every agent's queue (each task names its owner)")
}

func (r *queueCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	owner, _, tasks, err := c.queueTasks(r.all)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	groups := map[string][]map[string]any{"queued": {}, "running": {}, "finished": {}}
	for _, t := range tasks {
		groups[t.State()] = append(groups[t.State()], taskView(t, now))
	}
	res := &result{}
	if r.all {
		res.set("all", true)
	} else {
		res.set("agent", owner)
	}
	res.set("queued", groups["queued"]).set("running", groups["running"]).set("finished", groups["finished"])
	// A name taken again shows more than once: its thread tells which.
	named := map[string]int{}
	for _, t := range tasks {
		named[t.Name]++
	}
	res.human = func(w io.Writer) {
		for _, g := range []string{"queued", "running", "finished"} {
			fmt.Fprintf(w, "%s:\n", strings.ToUpper(g[:1])+g[1:])
			if len(groups[g]) == 0 {
				fmt.Fprintln(w, "  (none)")
			}
			for _, v := range groups[g] {
				extra := ""
				switch g {
				case "running":
					if a, ok := v["age_seconds"].(int); ok {
						extra = fmt.Sprintf(" (started %ds ago)", a)
					}
				case "finished":
					extra = fmt.Sprintf(" (%s)", v["status"])
				}
				if named[v["name"].(string)] > 1 {
					extra += fmt.Sprintf(" %s", v["thread_id"])
				}
				if r.all {
					extra += fmt.Sprintf(" [%s's queue]", v["owner"])
				}
				fmt.Fprintf(w, "  - %s%s\n", v["name"], extra)
			}
		}
	}
	return res, nil
}

// plural is n things, in the singular for one: "1 task", "3 tasks".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
