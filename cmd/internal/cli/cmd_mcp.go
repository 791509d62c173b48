package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

var mcpCommand = &command{
	name: "mcp", short: "serve every operation as MCP tools (Claude Code, Codex, Gemini CLI, …)",
	long: `Serve the Model Context Protocol on stdio (or streamable HTTP on a loopback
address with --http), so that an agent uses the bus as native tools instead
of shelling out: the worker loop (fetch, claim, renew, update, wait_reply,
done, fail), the leader's (send, list, show, reply, cancel, events, watch),
seed 003's queue and mailbox (push, run, receive, check, queue, mailbox),
agents, and the teams (team_create, team_add, team_remove, team_show,
team_list, ack). Each tool takes the command's flags as inputs (snake_case)
and returns the command's --json output; a failure is a tool error carrying
the CLI's error code and message.

Blocking tools (wait_reply, receive, watch) wait at most max_wait_seconds
(default 45, capped at 50) and then return woke:false with the cursor to call
again with, so no client times out; they stop at once when the client
cancels and report progress when it asks for it.

The run tool takes no command: its tasks run with this server's --exec (or
INBOX_EXEC in its environment), never a command from a tool call; a call
that passes exec is refused (invalid_input).

Over HTTP (--http) the server is only as open as the store. It listens on
loopback only, and every request must carry "Authorization: Bearer TOKEN":
at start it draws a random token and writes it to a file only its user can
read (--token-file; by default mcp.token inside a directory store, or
$XDG_CONFIG_HOME/inbox/mcp-nats-HASH.token, else ~/.config/inbox/…, for a
nats:// store), and says on stderr where it listens and where the token
is; the file is new at every start and removed at exit. A missing or wrong
token is 401; a request whose Origin is not a loopback origin, or whose
Host is not a loopback host, is 403. A session with no request for
--idle-timeout (default 30m) is closed; its id is then unknown (404) and
the client starts a new one.

--agent names the agent this session is: the default of every agent, from
and whose-mailbox input, and "waiting" in inbox agents while the server
runs. --channel (stdio) also pushes every new message of that agent's
mailbox into a running Claude Code session as a notifications/claude/channel
notification (Claude Code's experimental claude/channel capability), so the
agent learns of mail without polling. Logs go to stderr only.

Register it with Claude Code:
  claude mcp add inbox -- inbox mcp --agent backend-dev --db /path/to/store
and for channel notifications start Claude Code with
  claude --dangerously-load-development-channels server:inbox
(with "inbox mcp --agent NAME --channel" as the server's command). Over
HTTP, give the client the token of this start:
  claude mcp add --transport http inbox http://127.0.0.1:8765/mcp \
    --header "Authorization: Bearer $(cat /path/to/store/mcp.token)"`,
	examples: []string{
		"inbox mcp --agent backend-dev",
		"inbox mcp --agent coordinator --channel",
		"inbox mcp --http 127.0.0.1:8765 --exec 'claude -p \"$(cat)\"'",
	},
	new: func() runner { return &mcpCmd{} },
}

type mcpCmd struct {
	http        string
	channel     bool
	exec        string
	tokenFile   string
	idleTimeout string
}

func (r *mcpCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("the agent this session is (env INBOX_AGENT): the default agent of every tool")
	fs.StringVar(&r.http, "http", "", "serve streamable HTTP on this loopback address (127.0.0.1:PORT) instead of stdio")
	fs.BoolVar(&r.channel, "channel", false, "push new mail of --agent into Claude Code as notifications/claude/channel (stdio)")
	fs.StringVar(&r.exec, "exec", "", "command that runs a task started by the run tool: sh -c CMD, prompt on stdin (env INBOX_EXEC)")
	fs.StringVar(&r.tokenFile, "token-file", "", "with --http: write the bearer token here, owner-only (default: mcp.token in a directory store)")
	fs.StringVar(&r.idleTimeout, "idle-timeout", "30m", "with --http: close a session idle this long (a duration such as 30m, or seconds)")
}

// MCPConfig is what the MCP server is given: the open store and the
// session's settings.
type MCPConfig struct {
	Bus       inbox.Bus
	DB, Agent string
	// HTTP is the loopback address to serve streamable HTTP on; empty
	// serves stdio.
	HTTP string
	// TokenFile is where the HTTP server writes the bearer token every
	// request must carry (owner-only, replaced at every start).
	TokenFile string
	// IdleTimeout closes an HTTP session that has had no request for
	// this long.
	IdleTimeout time.Duration
	Channel     bool
	// Getenv is the environment the tools' commands see; its INBOX_EXEC
	// (the server's --exec, else its own environment's) is the only
	// command the run tool starts tasks with.
	Getenv  func(string) string
	Stderr  io.Writer
	Version string
}

// ServeMCP serves `inbox mcp` in this process when set (the inbox-mcp
// binary sets it); otherwise the command runs the inbox-mcp binary. The
// MCP SDK stays out of the inbox binary, whose every start would
// otherwise pay for it.
var ServeMCP func(ctx context.Context, cfg MCPConfig) error

func (r *mcpCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	if r.channel && r.http != "" {
		return nil, usagef("channel", "--channel works on stdio (Claude Code starts channel servers as subprocesses): leave out --http")
	}
	if r.channel && c.g.agent == "" {
		return nil, usagef("agent", "--channel pushes an agent's mail: give --agent (or INBOX_AGENT)")
	}
	idle, err := parseIdleTimeout(r.idleTimeout)
	if err != nil {
		return nil, err
	}
	if r.http == "" {
		if r.tokenFile != "" {
			return nil, usagef("token-file", "--token-file is where the HTTP server writes its token: give --http too")
		}
		if c.fs.Changed("idle-timeout") {
			return nil, usagef("idle-timeout", "--idle-timeout closes idle HTTP sessions: give --http too")
		}
	} else if err := loopbackAddr("http", r.http); err != nil {
		return nil, err
	}
	if c.g.agent != "" {
		if err := inbox.ValidateAgent("agent", c.g.agent); err != nil {
			return nil, err
		}
	}
	if ServeMCP == nil {
		return nil, execMCP(c)
	}
	tokenFile := ""
	if r.http != "" {
		if tokenFile, err = mcpTokenFile(r.tokenFile, c.g.db, c.env.getenv); err != nil {
			return nil, err
		}
	}
	getenv := c.env.getenv
	if r.exec != "" {
		getenv = func(k string) string {
			if k == "INBOX_EXEC" {
				return r.exec
			}
			return c.env.getenv(k)
		}
	}
	bus, err := c.open()
	if err != nil {
		return nil, err
	}
	if c.g.agent != "" {
		// While the server runs, the agent is live (inbox agents: waiting).
		defer bus.Waiting(c.ctx, c.g.agent)()
	}
	ctx, stop := c.blockingContext()
	defer stop()
	err = ServeMCP(ctx, MCPConfig{Bus: bus, DB: c.g.db, Agent: c.g.agent, HTTP: r.http, TokenFile: tokenFile,
		IdleTimeout: idle, Channel: r.channel, Getenv: getenv, Stderr: c.env.stderr, Version: buildVersion()})
	if err != nil {
		return nil, inbox.Internal(fmt.Errorf("mcp: %w", err))
	}
	return nil, nil
}

// mcpBinary is the name of the binary that serves MCP.
const mcpBinary = "inbox-mcp"

// execMCP replaces this process with inbox-mcp (beside this binary, else
// on PATH), given the same arguments.
func execMCP(c *call) error { return execCompanion(c, mcpBinary, "mcp_not_installed", "inbox mcp") }

// companion returns the path of the companion binary name (inbox-mcp,
// inbox-nats): beside this binary, else on PATH, else "".
func companion(name string) string {
	if self, err := Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), name); isExecutable(p) {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// loopbackAddr refuses a --flag address (inbox mcp --http, inbox web
// --addr) that is not HOST:PORT on the loopback interface: a bearer token
// read from a local file is the server's only credential, so only local
// processes may reach it.
func loopbackAddr(flag, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = strconv.Atoi(port)
	}
	if err != nil {
		return usagef(flag, "--%s %q is not HOST:PORT (e.g. 127.0.0.1:8765)", flag, addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return usagef(flag, "--%s %s is not a loopback address: the server listens on 127.0.0.1, ::1 or localhost only", flag, addr)
	}
	return nil
}

// parseIdleTimeout reads --idle-timeout: a Go duration or a whole number
// of seconds, more than 0.
func parseIdleTimeout(v string) (time.Duration, error) {
	return parseDurationFlag("idle-timeout", v, "30m or 90s", ": idle sessions always expire")
}

// mcpTokenFile is where the HTTP server writes its token (tokenFilePath):
// mcp.token inside a directory store unless --token-file says.
func mcpTokenFile(given, db string, getenv func(string) string) (string, error) {
	return tokenFilePath("mcp", given, db, getenv)
}

// storeHash names a store URL without its credentials or options: the
// first 8 bytes, in hex, of the SHA-256 of scheme://host/path.
func storeHash(db string) string {
	key := db
	if u, err := url.Parse(db); err == nil {
		key = u.Scheme + "://" + u.Host + u.Path
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
