package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// mcpServer is the state the tools share: the open store and the
// environment the in-process commands see.
type mcpServer struct {
	bus           inbox.Bus
	db, agent     string
	getenv0       func(string) string
	progressEvery time.Duration
	log           *slog.Logger
}

func (m *mcpServer) getenv(k string) string {
	switch k {
	case "INBOX_AGENT":
		return m.agent
	case "INBOX_DB":
		return m.db
	}
	return m.getenv0(k)
}

// newMCPServer builds the server for bus; agent may be empty.
func newMCPServer(bus inbox.Bus, db, agent string, getenv func(string) string, channel bool, log *slog.Logger) (*mcpServer, *mcp.Server) {
	m := &mcpServer{bus: bus, db: db, agent: agent, getenv0: getenv, progressEvery: 5 * time.Second, log: log}
	opts := &mcp.ServerOptions{
		Logger: log,
		Instructions: "inbox is a durable coordination bus shared with other agents. As a worker: fetch, claim one thread, " +
			"update with progress or a blocked question, wait_reply for the answer, then done or fail. As a leader: send work, " +
			"list/show threads, reply to blocked workers. Mail (notes, task results) arrives in your mailbox: receive or check.",
		Capabilities: &mcp.ServerCapabilities{},
	}
	if channel {
		opts.Capabilities.Experimental = map[string]any{"claude/channel": map[string]any{}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "inbox", Version: buildVersion()}, opts)
	m.tools(s)
	return m, s
}

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
	bus, err := c.open()
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(c.env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, server := newMCPServer(bus, c.g.db, c.g.agent, c.env.getenv, r.channel, log)
	if c.g.agent != "" {
		// While the server runs, the agent is live (inbox agents: waiting).
		defer bus.Waiting(c.g.agent)()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if r.http != "" {
		return nil, m.serveHTTP(ctx, server, r.http, c)
	}
	var t mcp.Transport = &mcp.StdioTransport{}
	if r.channel {
		ct := &channelTransport{Transport: t}
		t = ct
		go m.pushChannel(ctx, ct)
	}
	if err := server.Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, mcp.ErrConnectionClosed) {
		return nil, inbox.Internal(fmt.Errorf("mcp: %w", err))
	}
	return nil, nil
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

func (m *mcpServer) serveHTTP(ctx context.Context, server *mcp.Server, addr string, c *call) error {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usagef("http", "--http %s: %v", addr, errText(err))
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(c.env.stderr, "inbox mcp: serving streamable HTTP on http://%s/mcp\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return inbox.Internal(err)
	}
	return nil
}

// channelTransport is a transport that keeps its connection, so that the
// server can write notifications the SDK has no method for
// (notifications/claude/channel).
type channelTransport struct {
	mcp.Transport
	mu    sync.Mutex
	conn  mcp.Connection
	ready chan struct{}
}

func (t *channelTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.conn = conn
	t.mu.Unlock()
	t.readyChan()
	close(t.ready)
	return conn, nil
}

func (t *channelTransport) readyChan() chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ready == nil {
		t.ready = make(chan struct{})
	}
	return t.ready
}

// notify writes a notification on the connection.
func (t *channelTransport) notify(ctx context.Context, method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	return conn.Write(ctx, &jsonrpc.Request{Method: method, Params: raw})
}

// channelNotification is Claude Code's notifications/claude/channel: the
// text the session sees, and attributes.
type channelNotification struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// pushChannel follows the event log from now on and writes a channel
// notification for every message that lands in the agent's mailbox.
func (m *mcpServer) pushChannel(ctx context.Context, t *channelTransport) {
	select {
	case <-t.readyChan():
	case <-ctx.Done():
		return
	}
	after, err := m.bus.LastEventID()
	if err != nil {
		m.log.Error("channel: read the event log", "error", err)
		return
	}
	err = m.bus.Follow(ctx, after, "", inbox.WaitOptions{}, func(ev *inbox.Event) bool {
		if ev.MessageID == "" || ev.ThreadID == "" || ev.Agent == m.agent {
			return true
		}
		msg := m.messageOf(ev)
		if msg == nil || !slices.Contains(recipientsOf(msg), m.agent) || msg.FromAgent == m.agent {
			return true
		}
		n := channelNotification{Content: msg.Summary, Meta: map[string]string{
			"message_id": msg.MessageID, "thread_id": msg.ThreadID, "from": msg.FromAgent, "kind": msg.Kind,
			"event_id": strconv.FormatInt(ev.EventID, 10)}}
		if msg.Body != "" && msg.Body != msg.Summary {
			n.Content += "\n\n" + msg.Body
		}
		if msg.Type != "" {
			n.Meta["type"] = msg.Type
		}
		if err := t.notify(ctx, "notifications/claude/channel", n); err != nil {
			m.log.Warn("channel: notify", "error", err)
			return ctx.Err() == nil
		}
		return true
	})
	if err != nil && ctx.Err() == nil {
		m.log.Error("channel: follow the event log", "error", err)
	}
}

// messageOf returns the message an event added.
func (m *mcpServer) messageOf(ev *inbox.Event) *inbox.Message {
	if _, last, err := m.bus.LastMessage(ev.ThreadID); err == nil && last != nil && last.MessageID == ev.MessageID {
		return last
	}
	v, err := m.bus.Show(ev.ThreadID)
	if err != nil {
		return nil
	}
	for _, msg := range v.Messages {
		if msg.MessageID == ev.MessageID {
			return msg
		}
	}
	return nil
}
