package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/spool"
)

// defaultDB is the store used when neither --db nor INBOX_DB is set.
const defaultDB = ".agents/inbox"

// env is the process environment a command runs in.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// ctx and bus are set for the calls the MCP server makes: ctx ends
	// with the request, and bus is the store the server holds open.
	ctx context.Context
	bus inbox.Bus
}

// globals are the flags every command accepts, before or after its name.
type globals struct {
	db       string
	json     bool
	agent    string
	agentSet bool // --agent was given on the command line (not from env)
	dbSet    bool // --db was given on the command line (not from env)
	// lockTimeout is --lock-timeout (env INBOX_LOCK_TIMEOUT) as given:
	// how long a command waits for one of the store's locks.
	lockTimeout string
}

// command is one subcommand: its help and a constructor for its runner.
type command struct {
	name     string
	hidden   bool   // internal: not listed in help
	args     string // usage after the flags, e.g. "[PROMPT]"
	short    string
	long     string
	examples []string
	new      func() runner
}

// runner is one command's flag values and behaviour: flags registers
// them, run acts on them.
type runner interface {
	flags(fs *pflag.FlagSet, c *call)
	run(c *call) (*result, error)
}

// call is one invocation of a command.
type call struct {
	raw  []string // the arguments run was given
	cmd  *command
	g    globals
	env  *env
	fs   *pflag.FlagSet
	args []string
	// ctx is the invocation's context (invocationContext): cancelled by
	// SIGINT or SIGTERM, or with the MCP request; every Bus operation
	// takes it. in records the signal that cancelled it.
	ctx context.Context
	in  *interruption
	// recoverStore opens a store whose inbox.json or lock file was
	// planted (spool.Options.Recover), for fsck to report and repair.
	recoverStore bool
}

// agentFlag registers --agent with command-specific help.
func (c *call) agentFlag(help string) {
	c.fs.StringVar(&c.g.agent, "agent", c.g.agent, help)
}

// Main runs the command line of this process and returns its exit code.
func Main() int {
	return run(os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
}

func run(args []string, e *env) int {
	g := globals{db: e.getenv("INBOX_DB"), agent: e.getenv("INBOX_AGENT"), json: wantsJSON(args), lockTimeout: e.getenv("INBOX_LOCK_TIMEOUT")}
	rest, help, err := parseLeading(args, &g)
	if err != nil {
		return fail(e, g, "", err)
	}
	if help || len(rest) == 0 {
		rootHelp(e.stdout)
		if len(rest) == 0 && !help {
			return exitInvalid
		}
		return exitOK
	}
	name := rest[0]
	if name == "help" {
		if topic := firstWord(rest[1:]); topic != "" {
			if c := lookup(topic); c != nil {
				commandHelp(e.stdout, c)
				return exitOK
			}
			return fail(e, g, "help", usagef("", "unknown command %q (inbox help lists them)", topic))
		}
		rootHelp(e.stdout)
		return exitOK
	}
	if name == "version" {
		fmt.Fprintf(e.stdout, "inbox %s (store format %d)\n", buildVersion(), spool.FormatVersion)
		return exitOK
	}
	c := lookup(name)
	if c == nil {
		msg := fmt.Sprintf("unknown command %q", name)
		if s := suggest(name); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else if name == "server" {
			msg += "; a local NATS server for a nats:// store is \"inbox-nats server\""
		}
		return fail(e, g, name, usagef("", "%s (inbox help lists the commands)", msg))
	}
	cl, r := c.prepare(g, e)
	cl.raw = args
	if err := cl.fs.Parse(rest[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			commandHelp(e.stdout, c)
			return exitOK
		}
		return fail(e, cl.g, c.name, flagError(err, c.name, cl.fs))
	}
	if h, _ := cl.fs.GetBool("help"); h {
		commandHelp(e.stdout, c)
		return exitOK
	}
	if cl.fs.Changed("agent") {
		cl.g.agentSet = true
	}
	if cl.fs.Changed("db") {
		cl.g.dbSet = true
	}
	cl.args = cl.fs.Args()
	if cl.g.db == "" {
		cl.g.db = defaultDB
	}
	if isNATS(cl.g.db) && OpenNATS == nil && e.bus == nil && !storeless[c.name] {
		return fail(e, cl.g, c.name, handOver(cl))
	}
	ctx, stop, in := e.invocationContext()
	defer stop()
	cl.ctx, cl.in = ctx, in
	res, err := r.run(cl)
	if err != nil {
		return fail(e, cl.g, c.name, in.wrap(err))
	}
	return emit(e, cl.g, c.name, res)
}

// flagError turns a pflag parse error into a usage error that names the
// flag and the rule, without strconv's wording; an unknown flag gets the
// closest flag of fs (the command's), as an unknown command gets the
// closest command.
func flagError(err error, cmd string, fs *pflag.FlagSet) error {
	var (
		unknown *pflag.NotExistError
		needs   *pflag.ValueRequiredError
		bad     *pflag.InvalidValueError
		syntax  *pflag.InvalidSyntaxError
	)
	see := fmt.Sprintf("(see inbox %s --help)", cmd)
	switch {
	case errors.As(err, &unknown):
		name := strings.TrimLeft(unknown.GetSpecifiedName(), "-")
		msg := fmt.Sprintf("unknown flag --%s", name)
		if short := unknown.GetSpecifiedShortnames(); short != "" {
			msg = fmt.Sprintf("unknown flag -%s", name)
		} else if s := suggestFlag(name, fs); s != "" {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
		return usagef(name, "%s %s", msg, see)
	case errors.As(err, &needs):
		f := needs.GetFlag()
		return usagef(f.Name, "--%s needs a value %s", f.Name, see)
	case errors.As(err, &bad):
		f := bad.GetFlag()
		rule := "is not valid"
		switch f.Value.Type() {
		case "int", "int64", "int32", "uint", "uint64":
			rule = "must be a whole number"
		case "bool":
			rule = "must be true or false"
		case "duration":
			rule = "must be a duration such as 30s or 5m"
		case "float64", "float32":
			rule = "must be a number"
		}
		return usagef(f.Name, "--%s %q %s %s", f.Name, bad.GetValue(), rule, see)
	case errors.As(err, &syntax):
		return usagef("", "bad flag syntax %q %s", syntax.GetSpecifiedFlag(), see)
	}
	return usagef("", "%v %s", err, see)
}

// prepare makes a call of c: its runner, with the command's flags and the
// global ones registered on a fresh flag set.
func (c *command) prepare(g globals, e *env) (*call, runner) {
	cl := &call{cmd: c, g: g, env: e, ctx: context.Background(), in: &interruption{}}
	r := cl.ownFlags()
	cl.fs.StringVar(&cl.g.db, "db", g.db, "store directory (env INBOX_DB, default "+defaultDB+")")
	cl.fs.BoolVar(&cl.g.json, "json", g.json, "print one JSON object instead of text")
	cl.fs.StringVar(&cl.g.lockTimeout, "lock-timeout", g.lockTimeout, lockTimeoutUsage)
	if cl.fs.Lookup("agent") == nil {
		cl.fs.StringVar(&cl.g.agent, "agent", g.agent, "your agent name (env INBOX_AGENT)")
	}
	cl.fs.BoolP("help", "h", false, "show this help")
	return cl, r
}

// ownFlags gives cl a fresh flag set with its command's own flags, and
// returns the command's runner, which they set.
func (cl *call) ownFlags() runner {
	cl.fs = pflag.NewFlagSet("inbox "+cl.cmd.name, pflag.ContinueOnError)
	cl.fs.SetOutput(io.Discard)
	cl.fs.SortFlags = false
	r := cl.cmd.new()
	r.flags(cl.fs, cl)
	return r
}

// wantsJSON reports whether --json appears among the arguments, so that
// even an error found before flag parsing succeeds (an unknown command or
// flag) is reported in the JSON shape.
func wantsJSON(args []string) bool {
	json := false
	for _, a := range args {
		switch a {
		case "--":
			return json
		case "--json", "--json=true", "--json=1":
			json = true
		case "--json=false", "--json=0":
			json = false
		}
	}
	return json
}

// firstWord returns the first argument that is not a flag or a global
// flag's value.
func firstWord(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--db" || a == "--agent" {
			i++
			continue
		}
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// parseLeading consumes global flags that come before the command name.
func parseLeading(args []string, g *globals) (rest []string, help bool, err error) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		a := args[0]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "h", "help":
			return args[1:], true, nil
		case "json":
			g.json = !hasVal || val == "true" || val == "1"
		case "db", "agent", "lock-timeout":
			if !hasVal {
				if len(args) < 2 {
					return nil, false, usagef(name, "flag --%s needs a value", name)
				}
				val = args[1]
				args = args[1:]
			}
			switch name {
			case "db":
				g.db, g.dbSet = val, true
			case "lock-timeout":
				g.lockTimeout = val
			default:
				g.agent, g.agentSet = val, true
			}
		case "version":
			return []string{"version"}, false, nil
		default:
			return nil, false, usagef("", "unknown flag %s before the command (global flags are --db, --json, --agent, --lock-timeout)", a)
		}
		args = args[1:]
	}
	return args, false, nil
}

// emit prints a successful result and returns its exit code.
func emit(e *env, g globals, name string, res *result) int {
	if res == nil {
		return exitOK
	}
	if g.json {
		var o obj
		o.set("ok", !res.failed).set("command", name)
		for _, k := range res.body.keys {
			o.set(k, res.body.vals[k])
		}
		b, err := o.appendJSON(nil)
		if err != nil {
			return fail(e, g, name, err)
		}
		e.stdout.Write(append(b, '\n'))
	} else if res.human != nil {
		// Every human view goes through one humanWriter: nothing a
		// sender wrote can act on the reader's terminal (SPEC §4).
		w := newHumanWriter(e.stdout)
		res.human(w)
		w.Flush()
	}
	return res.exit
}

// fail reports err (stderr for people, the error shape on stdout with
// --json) and returns its exit code.
func fail(e *env, g globals, name string, err error) int {
	if g.json {
		var o obj
		o.set("ok", false).set("command", name)
		if errors.Is(err, context.Canceled) {
			o.set("interrupted", true)
		}
		o.set("error", errorShapeIn(err, name))
		b, _ := o.appendJSON(nil)
		e.stdout.Write(append(b, '\n'))
	} else {
		w := newHumanWriter(e.stderr)
		fmt.Fprintf(w, "inbox: error: %s\n", messageIn(err, name))
		if h := hintFor(err); h != "" {
			fmt.Fprintf(w, "inbox: hint: %s\n", h)
		}
		w.Flush()
	}
	return exitCode(err)
}

// absDB is the store location as another process, in another directory,
// must be given it: a directory made absolute; a URL as it is.
func absDB(db string) (string, error) {
	if strings.Contains(db, "://") {
		return db, nil
	}
	return filepath.Abs(db)
}

// open opens the store named by the globals.
func (c *call) open() (inbox.Bus, error) {
	if c.env.bus != nil {
		return c.env.bus, nil
	}
	if isNATS(c.g.db) {
		b, _, err := OpenNATS(c.ctx, c.g.db, false, "cli")
		return b, err
	}
	lt, err := parseLockTimeout(c.g.lockTimeout)
	if err != nil {
		return nil, err
	}
	return spool.Open(c.ctx, c.g.db, spool.Options{LockTimeout: lt, Recover: c.recoverStore})
}

// lockTimeoutUsage is --lock-timeout's help line.
const lockTimeoutUsage = "how long to wait for a lock of the store before failing with 50, naming its holder: a duration (30s, 2m) or seconds (env INBOX_LOCK_TIMEOUT, default 30s)"

// parseLockTimeout reads --lock-timeout: a Go duration or a whole number
// of seconds; empty means the store's default.
func parseLockTimeout(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	return parseDurationFlag("lock-timeout", v, "30s or 2m", "")
}

// parseDurationFlag reads the value v of --flag: a Go duration (such as
// example) or a whole number of seconds, more than 0 (why, when given,
// says why in the error).
func parseDurationFlag(flag, v, example, why string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil {
			return 0, usagef(flag, "--%s %q must be a duration such as %s, or a whole number of seconds", flag, v, example)
		}
		d = time.Duration(n) * time.Second
	}
	if d <= 0 {
		return 0, usagef(flag, "--%s %q must be more than 0%s", flag, v, why)
	}
	return d, nil
}

// agentName returns the agent for commands that need one.
func (c *call) agentName(flag string) (string, error) {
	if c.g.agent == "" {
		return "", usagef(flag, "--%s is required (or set INBOX_AGENT)", flag)
	}
	return c.g.agent, nil
}

// noArgs refuses positional arguments.
func (c *call) noArgs() error {
	if len(c.args) > 0 {
		return usagef("", "unexpected argument %q (inbox %s takes only flags; see --help)", c.args[0], c.cmd.name)
	}
	return nil
}

// agentNoArgs starts a command that takes only flags and acts as an
// agent: it refuses positional arguments, then returns --agent.
func (c *call) agentNoArgs() (string, error) {
	if err := c.noArgs(); err != nil {
		return "", err
	}
	return c.agentName("agent")
}

// openNoArgs starts a command that takes only flags and no agent: it
// refuses positional arguments, then opens the store.
func (c *call) openNoArgs() (inbox.Bus, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	return c.open()
}

// suggest returns the command name closest to s, if any is close.
func suggest(s string) string {
	best, bestD := "", 3
	for _, c := range commands {
		if d := inbox.EditDistance(s, c.name); d < bestD {
			best, bestD = c.name, d
		}
	}
	return best
}

// suggestFlag returns the flag of fs closest to name, if any is close:
// within an edit distance of 2, or (for 3 characters or more) a prefix of
// it, such as --timeout for --timeout-seconds. Hidden flags are not
// offered.
func suggestFlag(name string, fs *pflag.FlagSet) string {
	best, bestD := "", 3
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || len(f.Name) < 2 {
			return
		}
		d := inbox.EditDistance(name, f.Name)
		if d >= 3 && len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			d = 2
		}
		if d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// version is the version a binary's main package set with SetVersion
// (from its own -ldflags "-X main.version=…"); otherwise buildVersion
// reads the module version go install recorded.
var version = "dev"

// SetVersion sets the version the binary reports (--version, inbox
// version, the MCP server's implementation): each main package passes the
// version it was built with (-ldflags "-X main.version=…"). An empty v
// changes nothing.
func SetVersion(v string) {
	if v != "" {
		version = v
	}
}

// buildVersion is the version to report: -X main.version when set, else
// the module version of a "go install …@vX" build, else "dev" (a build
// from a checkout, which records "(devel)").
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// Invoke runs command cmd with args in-process for the MCP server, against
// its open store bus, with ctx ending the call, and returns the command's
// JSON output and exit code.
func Invoke(ctx context.Context, bus inbox.Bus, getenv func(string) string, cmd string, args []string) ([]byte, int) {
	var out bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard, getenv: getenv, ctx: ctx, bus: bus}
	code := run(append([]string{cmd, "--json"}, args...), e)
	b := bytes.TrimSpace(out.Bytes())
	if len(b) == 0 {
		b = fmt.Appendf(nil, `{"ok":false,"command":%q,"error":{"code":"internal_error","message":"no output"}}`, cmd)
	}
	return b, code
}

// Failure is what command prints with --json when it fails with err (the
// error shape), and its exit code: for a server that reports errors of
// its own the way the CLI does.
func Failure(command string, err error) ([]byte, int) {
	var out bytes.Buffer
	code := fail(&env{stdout: &out, stderr: io.Discard}, globals{json: true}, command, err)
	return bytes.TrimSpace(out.Bytes()), code
}

// CommandFlags returns the flags of command name as a fresh flag set
// nothing has parsed, or nil when there is no such command. It holds the
// command's own flags (--agent among them where the command gives it a
// meaning of its own), not the global ones every command takes (--db,
// --json, --lock-timeout, --agent, -h). The MCP server's tests check its
// tools' inputs against them.
func CommandFlags(name string) *pflag.FlagSet {
	c := lookup(name)
	if c == nil {
		return nil
	}
	cl := &call{cmd: c, env: &env{getenv: func(string) string { return "" }}}
	cl.ownFlags()
	return cl.fs
}

// ExitConflict is the exit code of a conflict; codes from it on are
// failures (10 is "nothing to do", a success).
const ExitConflict = exitConflict

// Version is the binary's version, as --version prints it.
func Version() string { return buildVersion() }
