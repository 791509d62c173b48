package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

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
(with "inbox mcp --agent NAME --channel" as the server's command).`,
	examples: []string{
		"inbox mcp --agent backend-dev",
		"inbox mcp --agent coordinator --channel",
		"inbox mcp --http 127.0.0.1:8765",
	},
	new: func() runner { return &mcpCmd{} },
}

type mcpCmd struct {
	http    string
	channel bool
}

func (r *mcpCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("the agent this session is (env INBOX_AGENT): the default agent of every tool")
	fs.StringVar(&r.http, "http", "", "serve streamable HTTP on this loopback address (127.0.0.1:PORT) instead of stdio")
	fs.BoolVar(&r.channel, "channel", false, "push new mail of --agent into Claude Code as notifications/claude/channel (stdio)")
}

// MCPConfig is what the MCP server is given: the open store and the
// session's settings.
type MCPConfig struct {
	Bus       inbox.Bus
	DB, Agent string
	// HTTP is the loopback address to serve streamable HTTP on; empty
	// serves stdio.
	HTTP    string
	Channel bool
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
	if r.http != "" {
		if err := loopback(r.http); err != nil {
			return nil, err
		}
	}
	if c.g.agent != "" {
		if err := inbox.ValidateAgent("agent", c.g.agent); err != nil {
			return nil, err
		}
	}
	if ServeMCP == nil {
		return nil, execMCP(c)
	}
	bus, err := c.open()
	if err != nil {
		return nil, err
	}
	if c.g.agent != "" {
		// While the server runs, the agent is live (inbox agents: waiting).
		defer bus.Waiting(c.g.agent)()
	}
	ctx, stop := c.blockingContext()
	defer stop()
	err = ServeMCP(ctx, MCPConfig{Bus: bus, DB: c.g.db, Agent: c.g.agent, HTTP: r.http, Channel: r.channel,
		Getenv: c.env.getenv, Stderr: c.env.stderr, Version: buildVersion()})
	if err != nil {
		return nil, inbox.Internal(fmt.Errorf("mcp: %w", err))
	}
	return nil, nil
}

// mcpBinary is the name of the binary that serves MCP.
const mcpBinary = "inbox-mcp"

// execMCP replaces this process with inbox-mcp (beside this binary, else
// on PATH), given the same arguments.
func execMCP(c *call) error {
	bin := ""
	if self, err := Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), mcpBinary); isExecutable(p) {
			bin = p
		}
	}
	if bin == "" {
		if p, err := exec.LookPath(mcpBinary); err == nil {
			bin = p
		}
	}
	if bin == "" {
		return inbox.Errorf(inbox.ErrNotFound, "mcp_not_installed", "",
			"inbox mcp runs the %s binary, found neither beside this one nor on PATH: build both with go build -o bin/ ./cmd/... (or go install ./cmd/...)", mcpBinary)
	}
	args := append([]string{mcpBinary}, c.raw...)
	err := syscall.Exec(bin, args, os.Environ())
	return inbox.Internal(fmt.Errorf("run %s: %w", bin, err))
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// loopback refuses an --http address that is not on the loopback
// interface: the server has no authentication of its own.
func loopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = strconv.Atoi(port)
	}
	if err != nil {
		return usagef("http", "--http %q is not HOST:PORT (e.g. 127.0.0.1:8765)", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return usagef("http", "--http %s is not a loopback address: the server has no authentication, so it listens on 127.0.0.1 or ::1 only", addr)
	}
	return nil
}
