package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// mcpTest is a server over a fresh store and a client connected to it
// through the SDK's in-memory transports.
type mcpTest struct {
	t        *testing.T
	db       string
	bus      *spool.Store
	cs       *mcp.ClientSession
	progress chan *mcp.ProgressNotificationParams
	channel  chan *jsonrpc.Request
	outputs  outputChecks
}

func newMCPTest(t *testing.T, agent string, channel bool) *mcpTest {
	t.Helper()
	return newMCPTestEnv(t, agent, channel, os.Getenv)
}

// newMCPTestEnv is newMCPTest with the environment the tools see.
func newMCPTestEnv(t *testing.T, agent string, channel bool, getenv func(string) string) *mcpTest {
	t.Helper()
	s, db := storetest.New(t, spool.Options{})
	mt := &mcpTest{t: t, db: db, bus: s, progress: make(chan *mcp.ProgressNotificationParams, 100),
		channel: make(chan *jsonrpc.Request, 100)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, server := newMCPServer(s, db, agent, getenv, channel, log)
	m.progressEvery = 50 * time.Millisecond
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var serverT mcp.Transport = st
	if channel {
		cht := &channelTransport{Transport: st}
		serverT = cht
		go m.pushChannel(ctx, cht)
	}
	ss, err := server.Connect(ctx, serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mt.progress <- req.Params
		},
	})
	mt.cs, err = client.Connect(ctx, &sniffTransport{Transport: ct, seen: mt.channel}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mt.cs.Close() })
	return mt
}

// sniffTransport takes channel notifications off the client's connection
// (the SDK's client knows no such method) and hands them to the test.
type sniffTransport struct {
	mcp.Transport
	seen chan *jsonrpc.Request
}

type sniffConn struct {
	mcp.Connection
	seen chan *jsonrpc.Request
}

func (t *sniffTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	return &sniffConn{c, t.seen}, err
}

func (c *sniffConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if r, ok := msg.(*jsonrpc.Request); ok && err == nil && r.Method == "notifications/claude/channel" {
			c.seen <- r
			continue
		}
		return msg, err
	}
}

// call calls a tool and returns its structured result as a map.
func (mt *mcpTest) call(name string, args map[string]any) (map[string]any, bool) {
	mt.t.Helper()
	return mt.callCtx(context.Background(), name, args, nil)
}

func (mt *mcpTest) callCtx(ctx context.Context, name string, args map[string]any, progressToken any) (map[string]any, bool) {
	mt.t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progressToken != nil {
		p.SetProgressToken(progressToken)
	}
	res, err := mt.cs.CallTool(ctx, p)
	if err != nil {
		mt.t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out == nil {
		mt.t.Fatalf("%s: structured result %s is not an object (%v); content %+v", name, b, err, res.Content)
	}
	// The text content is the same JSON, for clients that read only text.
	if len(res.Content) != 1 {
		mt.t.Fatalf("%s: %d content blocks", name, len(res.Content))
	}
	var fromText map[string]any
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || json.Unmarshal([]byte(tc.Text), &fromText) != nil {
		mt.t.Fatalf("%s: the text content is not the JSON result: %+v", name, res.Content[0])
	}
	mt.checkOutput(name, out)
	return out, res.IsError
}

// ok calls a tool that must succeed.
func (mt *mcpTest) ok(name string, args map[string]any) map[string]any {
	mt.t.Helper()
	out, isErr := mt.call(name, args)
	if isErr || out["ok"] != true {
		mt.t.Fatalf("%s %v: %v", name, args, out)
	}
	return out
}

// fails calls a tool that must fail with code.
func (mt *mcpTest) fails(name string, args map[string]any, code string) map[string]any {
	mt.t.Helper()
	out, isErr := mt.call(name, args)
	e, _ := out["error"].(map[string]any)
	if !isErr || out["ok"] != false || e == nil || e["code"] != code {
		mt.t.Fatalf("%s %v: %v (isError %v), want error %s", name, args, out, isErr, code)
	}
	return out
}

func get(v any, path string) any {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i := 0
			for _, c := range p {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func TestMCPToolsList(t *testing.T) {
	mt := newMCPTest(t, "", false)
	res, err := mt.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if len(tool.Description) < 30 {
			t.Errorf("%s: a description too short to teach when to use it: %q", tool.Name, tool.Description)
		}
		if tool.InputSchema == nil {
			t.Errorf("%s has no input schema", tool.Name)
		}
	}
	want := []string{"fetch", "claim", "renew", "update", "reply", "done", "fail", "cancel", "send", "list", "show",
		"wait_reply", "watch", "events", "push", "run", "receive", "check", "queue", "mailbox", "agents",
		"team_create", "team_add", "team_remove", "team_show", "team_list", "ack", "search"}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("no tool %s (have %v)", w, names)
		}
	}
	// Seed 003's input names.
	schemas := map[string]string{}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		schemas[tool.Name] = string(b)
	}
	for tool, inputs := range map[string][]string{"push": {"name", "prompt"}, "run": {"count"}, "send": {"to", "message"},
		"receive": {"from", "max_wait_seconds"}} {
		for _, in := range inputs {
			if !strings.Contains(schemas[tool], `"`+in+`"`) {
				t.Errorf("%s has no input %q: %s", tool, in, schemas[tool])
			}
		}
	}
}

// TestMCPWorkerLoop drives seed 000's loop through the tools: a leader
// sends, a worker fetches, claims, asks, waits, is answered, finishes.
func TestMCPWorkerLoop(t *testing.T) {
	mt := newMCPTest(t, "worker", false)
	sent := mt.ok("send", map[string]any{"from": "leader", "to": "worker", "subject": "Add routes", "body": "under /posts"})
	tid := get(sent, "thread.thread_id").(string)
	if got := mt.ok("fetch", nil); get(got, "threads.0.thread_id") != tid {
		t.Fatalf("fetch: %v", got)
	}
	cl := mt.ok("claim", map[string]any{"thread": tid, "lease_seconds": 60})
	token := get(cl, "lease.lease_token")
	mt.ok("renew", map[string]any{"thread": tid, "lease_seconds": 120, "lease_token": token})
	mt.ok("update", map[string]any{"thread": tid, "status": "in_progress", "summary": "working"})
	q := mt.ok("update", map[string]any{"thread": tid, "status": "blocked", "summary": "which auth?"})
	after := get(q, "message.event_id")
	// Nothing yet: woke false, with the cursor to resume from.
	w := mt.ok("wait_reply", map[string]any{"thread": tid, "after_event": after, "max_wait_seconds": 0.2})
	if w["woke"] != false || w["next_event_id"] == nil {
		t.Fatalf("wait with no answer: %v", w)
	}
	mt.ok("reply", map[string]any{"from": "leader", "thread": tid, "kind": "answer", "summary": "email/password"})
	w = mt.ok("wait_reply", map[string]any{"thread": tid, "after_event": after})
	if w["woke"] != true || get(w, "message.summary") != "email/password" {
		t.Fatalf("wait after the answer: %v", w)
	}
	mt.ok("done", map[string]any{"thread": tid, "summary": "routes added", "lease_token": token})
	if s := mt.ok("show", map[string]any{"thread": tid, "mark_read": true}); get(s, "thread.status") != "done" || len(s["messages"].([]any)) != 5 {
		t.Fatalf("show: %v", s)
	}
	if l := mt.ok("list", map[string]any{"status": "done"}); get(l, "threads.0.thread_id") != tid {
		t.Fatalf("list: %v", l)
	}
	ev := mt.ok("events", map[string]any{"thread": tid, "after_event": 0})
	if n := len(ev["events"].([]any)); n < 6 {
		t.Fatalf("events: %d", n)
	}
	mt.fails("fail", map[string]any{"thread": tid, "summary": "too late"}, "invalid_state")
	// cancel, watch
	c := mt.ok("send", map[string]any{"from": "leader", "to": "worker", "subject": "never mind"})
	mt.ok("cancel", map[string]any{"agent": "leader", "thread": get(c, "thread.thread_id"), "reason": "dropped"})
	start := mt.ok("events", nil)
	sent2 := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, err := mt.bus.Send(t.Context(), inbox.SendInput{From: "leader", To: "worker", Subject: "new work"})
		sent2 <- err
	}()
	wt := mt.ok("watch", map[string]any{"after_event": start["next_event_id"], "max_wait_seconds": 5})
	if err := <-sent2; err != nil {
		t.Fatal(err)
	}
	if wt["woke"] != true {
		t.Fatalf("watch: %v", wt)
	}
}

// TestMCPSeed003 drives seed 003's tools with its input names.
func TestMCPSeed003(t *testing.T) {
	bin := testproc.Installed(t, "inbox")
	cli.Executable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { cli.Executable = os.Executable })
	// The server's INBOX_EXEC is what runs a task.
	mt := newMCPTestEnv(t, "main", false, func(k string) string {
		if k == "INBOX_EXEC" {
			return "cat"
		}
		return os.Getenv(k)
	})
	mt.ok("send", map[string]any{"to": "main", "from": "helper", "message": "phase 1 done"})
	got := mt.ok("receive", map[string]any{"from": "helper", "max_wait_seconds": 1})
	if got["woke"] != true || get(got, "message.body") != "phase 1 done" {
		t.Fatalf("receive: %v", got)
	}
	if got := mt.ok("receive", map[string]any{"max_wait_seconds": 0.1}); got["woke"] != false {
		t.Fatalf("receive from an empty mailbox: %v", got)
	}
	mt.ok("send", map[string]any{"to": "main", "from": "helper", "message": "a"})
	mt.ok("send", map[string]any{"to": "main", "from": "helper", "message": "b"})
	if mb := mt.ok("mailbox", nil); len(mb["messages"].([]any)) != 2 {
		t.Fatalf("mailbox: %v", mb)
	}
	if ch := mt.ok("check", map[string]any{}); len(ch["messages"].([]any)) != 2 {
		t.Fatalf("check: %v", ch)
	}
	out, _ := mt.call("check", nil)
	if out["ok"] != true || len(out["messages"].([]any)) != 0 {
		t.Fatalf("check of an empty mailbox: %v", out)
	}
	p := mt.ok("push", map[string]any{"name": "research", "prompt": "find the auth flow"})
	if get(p, "task.name") != "research" {
		t.Fatalf("push: %v", p)
	}
	if q := mt.ok("queue", nil); len(q["queued"].([]any)) != 1 {
		t.Fatalf("queue: %v", q)
	}
	ran := mt.ok("run", map[string]any{"count": 1})
	if pid, ok := ran["runner_pid"].(float64); ok {
		// The detached runner writes to the store until it exits.
		t.Cleanup(func() { waitExit(t, int(pid)) })
	}
	res := mt.ok("receive", map[string]any{"from": "research", "max_wait_seconds": 20})
	if res["woke"] != true || get(res, "message.body") != "find the auth flow" {
		t.Fatalf("the task's result: %v", res)
	}
	if a := mt.ok("agents", nil); len(a["agents"].([]any)) < 2 {
		t.Fatalf("agents: %v", a)
	}
}

// TestMCPRunRefusesExec: a tool call cannot give run a command; one that
// tries is refused as invalid input naming exec, and nothing starts.
func TestMCPRunRefusesExec(t *testing.T) {
	mt := newMCPTest(t, "main", false)
	mt.ok("push", map[string]any{"name": "job", "prompt": "p"})
	for _, exec := range []any{"touch " + filepath.Join(t.TempDir(), "ran"), "", nil} {
		e := mt.fails("run", map[string]any{"count": 1, "exec": exec}, "invalid_input")
		if get(e, "error.field") != "exec" || !strings.Contains(get(e, "error.message").(string), "--exec") {
			t.Errorf("run with exec %v: %v", exec, e)
		}
	}
	if q := mt.ok("queue", nil); len(q["queued"].([]any)) != 1 {
		t.Errorf("a refused run started the task: %v", q)
	}
	// Without a command of the server's own, run says how to give one.
	t.Setenv("INBOX_EXEC", "")
	if e := mt.fails("run", nil, "invalid_input"); get(e, "error.field") != "exec" {
		t.Errorf("run without a server command: %v", e)
	}
}

func TestMCPTeamsAndErrors(t *testing.T) {
	mt := newMCPTest(t, "lead", false)
	mt.ok("team_create", map[string]any{"team": "crew", "member": []string{"a", "b"}})
	mt.ok("team_add", map[string]any{"team": "crew", "member": []string{"c"}})
	mt.ok("team_remove", map[string]any{"team": "crew", "member": []string{"c"}})
	if s := mt.ok("team_show", map[string]any{"team": "crew"}); len(get(s, "team.members").([]any)) != 2 {
		t.Fatalf("team_show: %v", s)
	}
	if l := mt.ok("team_list", nil); len(l["teams"].([]any)) != 1 {
		t.Fatalf("team_list: %v", l)
	}
	s := mt.ok("send", map[string]any{"to": "@crew", "subject": "please ack", "ack_required": true, "type": "task_assignment",
		"content_json": `{"taskId":"t1"}`})
	mid := get(s, "message.message_id")
	if get(s, "message.type") != "task_assignment" {
		t.Fatalf("typed send: %v", s)
	}
	mt.ok("ack", map[string]any{"agent": "a", "message": mid})
	mt.fails("team_create", map[string]any{"team": "crew"}, "team_exists")
	mt.fails("team_show", map[string]any{"team": "nope"}, "team_not_found")
	mt.fails("claim", map[string]any{"thread": "thr_nope"}, "not_found")
	mt.fails("send", map[string]any{"to": "@nope", "subject": "x"}, "team_not_found")
	e := mt.fails("update", map[string]any{"thread": "thr_x", "status": "sideways"}, "invalid_input")
	if !strings.Contains(get(e, "error.message").(string), "status") {
		t.Errorf("the error does not name the field: %v", e)
	}
	mt.fails("wait_reply", map[string]any{"thread": "thr_nope"}, "not_found")
	// A missing required input is refused by the schema before anything runs.
	res, err := mt.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "claim", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Fatalf("claim without a thread: %+v %v", res, err)
	}
}

// TestMCPWaitWokenByCLI: a wait_reply blocked in the server wakes when
// another process (the inbox binary) replies.
func TestMCPWaitWokenByCLI(t *testing.T) {
	mt := newMCPTest(t, "worker", false)
	r, err := mt.bus.Send(t.Context(), inbox.SendInput{From: "leader", To: "worker", Subject: "q"})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	done := make(chan map[string]any, 1)
	go func() {
		out, _ := mt.call("wait_reply", map[string]any{"thread": tid, "after_event": r.Message.EventID, "max_wait_seconds": 20})
		done <- out
	}()
	time.Sleep(200 * time.Millisecond)
	cmd := exec.Command(testproc.Installed(t, "inbox"), "reply", "--db", mt.db, "--from", "leader", "--thread", tid, "--kind", "answer", "--summary", "from the CLI")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	select {
	case out := <-done:
		if out["woke"] != true || get(out, "message.summary") != "from the CLI" {
			t.Fatalf("wait_reply: %v", out)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the CLI's reply did not wake the MCP wait")
	}
}

// TestMCPWaitCancelAndProgress: a blocked call reports progress to a
// client that asked for it, and returns at once when cancelled.
func TestMCPWaitCancelAndProgress(t *testing.T) {
	mt := newMCPTest(t, "worker", false)
	r, _ := mt.bus.Send(t.Context(), inbox.SendInput{From: "leader", To: "worker", Subject: "q"})
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan time.Time, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "wait_reply", Arguments: map[string]any{"thread": r.Thread.ThreadID, "after_event": r.Message.EventID,
			"max_wait_seconds": 50}}
		p.SetProgressToken("tok-1")
		mt.cs.CallTool(ctx, p)
		returned <- time.Now()
	}()
	select {
	case pr := <-mt.progress:
		if pr.ProgressToken != "tok-1" || pr.Total != 50 || !strings.Contains(pr.Message, "wait_reply") {
			t.Errorf("progress: %+v", pr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no progress notification")
	}
	cancelled := time.Now()
	cancel()
	select {
	case at := <-returned:
		if d := at.Sub(cancelled); d > 2*time.Second {
			t.Errorf("returned %v after the cancellation", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled wait did not return")
	}
	// The server's wait ended too: the agent is not waiting any more.
	deadline := time.Now().Add(5 * time.Second)
	for {
		as, err := mt.bus.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waiting := false
		for _, a := range as {
			waiting = waiting || a.Agent == "worker" && a.State == inbox.StateWaiting
		}
		if !waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled wait still counts as waiting")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out := mt.ok("wait_reply", map[string]any{"thread": r.Thread.ThreadID, "after_event": r.Message.EventID, "max_wait_seconds": 0}); out["woke"] != false {
		t.Errorf("zero wait: %v", out)
	}
}

func TestMCPMaxWait(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		given *float64
		want  float64
	}{{nil, 45}, {f(10), 10}, {f(50), 50}, {f(600), 50}, {f(-3), 0}, {f(0.5), 0.5}} {
		if got := maxWait(c.given); got != c.want {
			t.Errorf("maxWait(%v) = %v, want %v", c.given, got, c.want)
		}
	}
	args := toArgs(waitReplyIn{Thread: "thr_1", AfterEvent: new(int64), Kinds: "answer", waitIn: waitIn{MaxWaitSeconds: f(3)}})
	if want := []string{"--thread=thr_1", "--after-event=0", "--kinds=answer"}; !slices.Equal(args, want) {
		t.Errorf("toArgs: %q, want %q", args, want)
	}
	args = toArgs(pushIn{Name: "n", Prompt: "--not-a-flag"})
	if want := []string{"--name=n", "--", "--not-a-flag"}; !slices.Equal(args, want) {
		t.Errorf("toArgs with a positional: %q, want %q", args, want)
	}
}

// TestMCPConcurrentCalls: many calls at once in one server.
func TestMCPConcurrentCalls(t *testing.T) {
	mt := newMCPTest(t, "w", false)
	var wg sync.WaitGroup
	ids := make(chan string, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := mt.ok("send", map[string]any{"from": "boss", "to": "w", "subject": "job " + string(rune('a'+i%26))})
			ids <- get(out, "thread.thread_id").(string)
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	if len(seen) != 40 {
		t.Fatalf("%d distinct threads from 40 sends", len(seen))
	}
	if f := mt.ok("fetch", map[string]any{"limit": 100}); len(f["threads"].([]any)) != 40 {
		t.Fatalf("fetch after concurrent sends: %d", len(f["threads"].([]any)))
	}
}

// TestMCPChannel: with --channel, each new message to the agent is pushed
// as notifications/claude/channel; the agent's own messages and others'
// mail are not.
func TestMCPChannel(t *testing.T) {
	mt := newMCPTest(t, "dev", true)
	res := mt.ok("agents", nil) // the session is up
	_ = res
	time.Sleep(100 * time.Millisecond)
	mt.bus.Send(t.Context(), inbox.SendInput{From: "lead", To: "other", Content: inbox.Content{Body: "not for dev"}})
	mt.bus.Send(t.Context(), inbox.SendInput{From: "dev", To: "lead", Content: inbox.Content{Body: "from dev"}})
	r, err := mt.bus.Send(t.Context(), inbox.SendInput{From: "lead", To: "dev", Subject: "Review PR 7", Content: inbox.Content{Body: "see the diff", Type: "task_assignment"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-mt.channel:
		var p channelNotification
		if err := json.Unmarshal(n.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.Meta["message_id"] != r.Message.MessageID || p.Meta["from"] != "lead" || p.Meta["thread_id"] != r.Thread.ThreadID ||
			p.Meta["kind"] != "task" || p.Meta["type"] != "task_assignment" || !strings.Contains(p.Content, "Review PR 7") || !strings.Contains(p.Content, "see the diff") {
			t.Errorf("notification %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no channel notification")
	}
	select {
	case n := <-mt.channel:
		t.Errorf("an extra notification: %s", n.Params)
	case <-time.After(300 * time.Millisecond):
	}
	// The capability is declared.
	if caps := mt.cs.InitializeResult().Capabilities; caps.Experimental["claude/channel"] == nil {
		t.Errorf("capabilities %+v", caps)
	}
}

// waitExit waits (up to 10 s) for process pid to be gone: exited (a
// zombie, as a child of this test process that never waits for it) or
// reaped.
func waitExit(t *testing.T, pid int) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || syscall.Kill(pid, 0) != nil {
			return
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("the runner (pid %d) did not exit within 10 s", pid)
}

// TestMCPSearch: the search tool finds what the CLI's search finds, with
// the CLI's JSON (SPEC §16), and an empty list when nothing matches.
func TestMCPSearch(t *testing.T) {
	mt := newMCPTest(t, "lead", false)
	mt.ok("send", map[string]any{"to": "dev", "subject": "Database migration", "body": "Move the users table to Postgres."})
	mt.ok("send", map[string]any{"to": "dev", "message": "postgresql is down"})
	res := mt.ok("search", map[string]any{"query": "postgres"})
	hits, _ := res["results"].([]any)
	if len(hits) != 1 || get(res, "results.0.subject") != "Database migration" || get(res, "results.0.message.from_agent") != "lead" {
		t.Fatalf("search postgres: %v", res)
	}
	if s, _ := get(res, "results.0.snippet").(string); !strings.Contains(s, "Postgres") {
		t.Errorf("snippet: %q", s)
	}
	res = mt.ok("search", map[string]any{"query": `"table users"`, "from": "lead"})
	if hits, _ := res["results"].([]any); len(hits) != 0 {
		t.Errorf("a phrase out of order matched: %v", res)
	}
}
