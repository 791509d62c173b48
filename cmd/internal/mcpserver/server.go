// Package mcpserver serves inbox's operations as Model Context Protocol
// tools (SPEC §12) with the official Go SDK: each tool runs its CLI
// command in-process (cli.Invoke) against the store the server holds
// open, so results are the CLI's JSON and failures its error shape.
// tools/list gives each tool an output schema that describes that JSON
// and hints that say whether it reads, writes or destroys (outputs.go).
// It is linked into the inbox-mcp binary only, so that the inbox binary
// does not pay the SDK's start-up cost.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/cmd/internal/cli"
)

// Serve serves MCP as cfg says until ctx ends or the client goes (stdio).
func Serve(ctx context.Context, cfg cli.MCPConfig) error {
	log := slog.New(slog.NewTextHandler(cfg.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, server := newMCPServer(cfg.Bus, cfg.DB, cfg.Agent, cfg.Getenv, cfg.Channel, log)
	if cfg.HTTP != "" {
		return m.serveHTTP(ctx, server, cfg)
	}
	var t mcp.Transport = &mcp.StdioTransport{}
	if cfg.Channel {
		ct := &channelTransport{Transport: t}
		t = ct
		go m.pushChannel(ctx, ct)
	}
	err := server.Run(ctx, t)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, mcp.ErrConnectionClosed) {
		return err
	}
	return nil
}

// recipientsOf is who a message went to.
func recipientsOf(m *inbox.Message) []string {
	if len(m.Recipients) > 0 {
		return m.Recipients
	}
	return []string{m.ToAgent}
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
		// Tools that share an input or result type share its schema,
		// inferred and resolved once.
		SchemaCache: mcp.NewSchemaCache(),
	}
	if channel {
		opts.Capabilities.Experimental = map[string]any{"claude/channel": map[string]any{}}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "inbox", Version: cli.Version()}, opts)
	s.AddReceivingMiddleware(refuseInputs)
	m.tools(s)
	return m, s
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
	after, err := m.bus.LastEventID(ctx)
	if err != nil {
		m.log.Error("channel: read the event log", "error", err)
		return
	}
	err = m.bus.Follow(ctx, after, "", inbox.WaitOptions{}, func(ev *inbox.Event) bool {
		if ev.MessageID == "" || ev.ThreadID == "" || ev.Agent == m.agent {
			return true
		}
		msg := m.messageOf(ctx, ev)
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
func (m *mcpServer) messageOf(ctx context.Context, ev *inbox.Event) *inbox.Message {
	if _, last, err := m.bus.LastMessage(ctx, ev.ThreadID); err == nil && last != nil && last.MessageID == ev.MessageID {
		return last
	}
	v, err := m.bus.Show(ctx, ev.ThreadID)
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
