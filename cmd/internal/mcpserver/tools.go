package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
)

// The MCP tools (SPEC §12). Each tool is a CLI command: its input struct
// mirrors the command's flags (json name = flag name with _ for -), and
// the tool runs the command in-process against the store the server holds
// open, so its structured result is the CLI's JSON and a failure is the
// CLI's error shape with its code. Inputs are turned into arguments by
// reflection (toArgs): a field tagged flag:",pos" is a positional
// argument, flag:"-" is not passed on, flag:"name" passes it as --name,
// and zero values are left out. tools_flags_test.go checks every tool's
// inputs against its command's flags.

// Shared inputs.

type contentIn struct {
	Summary     string `json:"summary,omitempty" jsonschema:"one-line summary"`
	Body        string `json:"body,omitempty" jsonschema:"message body (free text, any size)"`
	PayloadJSON string `json:"payload_json,omitempty" jsonschema:"structured payload: one JSON value, as a string"`
	artifactIn
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"retry-safe key: repeating the call with it returns the first result and writes nothing"`
}

type artifactIn struct {
	Artifact             []string `json:"artifact,omitempty" jsonschema:"file paths to attach as references (the files are not read)"`
	ArtifactKind         []string `json:"artifact_kind,omitempty" jsonschema:"the kind of each artifact, in order (default file)"`
	ArtifactMetadataJSON []string `json:"artifact_metadata_json,omitempty" jsonschema:"JSON metadata of each artifact, in order, as strings"`
}

type typedIn struct {
	Type        string `json:"type,omitempty" jsonschema:"seed 002 message type: task_assignment, task_status_request, task_status_response, message, team_broadcast, idle_notification, task_completion, blocking_notification, acknowledgment, or any [a-z_]+"`
	ContentJSON string `json:"content_json,omitempty" jsonschema:"seed 002 content: a JSON object as a string, stored as the payload"`
	RequestID   string `json:"request_id,omitempty" jsonschema:"request id: makes the message a request (send) or the response to one (reply)"`
	AckRequired bool   `json:"ack_required,omitempty" jsonschema:"ask each recipient to acknowledge (ack tool)"`
}

type waitIn struct {
	MaxWaitSeconds *float64 `json:"max_wait_seconds,omitempty" flag:"-" jsonschema:"how long to block at most (default 45, capped at 50); on timeout the result has woke:false and the cursor to call again with"`
}

type fetchIn struct {
	Agent  string `json:"agent,omitempty" jsonschema:"the worker looking for work (default: the server's agent)"`
	Status string `json:"status,omitempty" jsonschema:"statuses, comma-separated (default pending,blocked)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many threads (default 20)"`
	Unread bool   `json:"unread,omitempty" jsonschema:"only threads with a message from someone else past your read cursor"`
}

type claimIn struct {
	Agent        string `json:"agent,omitempty" jsonschema:"the agent taking the lease (default: the server's agent)"`
	Thread       string `json:"thread" jsonschema:"thread id"`
	LeaseSeconds int    `json:"lease_seconds,omitempty" jsonschema:"lease length in seconds (default 900)"`
}

type tokenIn struct {
	LeaseToken int64 `json:"lease_token,omitempty" jsonschema:"refuse unless this is the current lease token"`
}

type renewIn struct {
	claimIn
	tokenIn
}

type holderIn struct {
	Agent  string `json:"agent,omitempty" jsonschema:"the lease holder (default: the server's agent)"`
	Thread string `json:"thread" jsonschema:"thread id"`
}

type updateIn struct {
	holderIn
	Status string `json:"status" jsonschema:"in_progress (progress) or blocked (a question: say exactly what is missing in summary)"`
	tokenIn
	contentIn
}

type finishIn struct {
	holderIn
	tokenIn
	contentIn
}

type replyIn struct {
	From   string `json:"from,omitempty" jsonschema:"sender (default: the server's agent)"`
	To     string `json:"to,omitempty" jsonschema:"recipient: an agent, several (a,b) or a team (@team); default the other party"`
	Thread string `json:"thread" jsonschema:"thread id"`
	Kind   string `json:"kind,omitempty" jsonschema:"answer, question, progress or control (required unless type gives one)"`
	contentIn
	typedIn
}

type cancelIn struct {
	Agent          string `json:"agent,omitempty" jsonschema:"who cancels (default: the server's agent)"`
	Thread         string `json:"thread,omitempty" jsonschema:"thread id (or name)"`
	Name           string `json:"name,omitempty" jsonschema:"a queued or running task, by name (or thread)"`
	Reason         string `json:"reason,omitempty" jsonschema:"why (the message summary)"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"retry-safe key"`
	artifactIn
}

type sendIn struct {
	To       string `json:"to,omitempty" jsonschema:"recipient: an agent, several (a,b) or a team (@team); required for a new thread"`
	Message  string `json:"message,omitempty" flag:"body" jsonschema:"the message text (seed 003's send): without subject it is a note in the recipient's mailbox, not work"`
	From     string `json:"from,omitempty" jsonschema:"sender (default: the server's agent)"`
	Subject  string `json:"subject,omitempty" jsonschema:"subject of a new work thread: the recipient's fetch shows it until claimed"`
	Thread   string `json:"thread,omitempty" jsonschema:"append to this thread instead of starting one"`
	Kind     string `json:"kind,omitempty" jsonschema:"task, question, answer, progress, result, control or event"`
	Priority string `json:"priority,omitempty" jsonschema:"low, normal or high (new thread)"`
	Run      string `json:"run,omitempty" jsonschema:"run id to record on a new thread"`
	Task     string `json:"task,omitempty" jsonschema:"task id to record on a new thread"`
	Request  bool   `json:"request,omitempty" jsonschema:"make it a request with a generated request_id"`
	Seed002  string `json:"seed002,omitempty" jsonschema:"send a seed-002 JSON line as it is (type, from, to, timestamp, content, ...)"`
	contentIn
	typedIn
}

type listIn struct {
	Agent      string `json:"agent,omitempty" jsonschema:"only threads this agent created or is assigned"`
	Status     string `json:"status,omitempty" jsonschema:"statuses, comma-separated (default all)"`
	CreatedBy  string `json:"created_by,omitempty" jsonschema:"only threads created by this agent"`
	AssignedTo string `json:"assigned_to,omitempty" jsonschema:"only threads assigned to this agent"`
	Limit      int    `json:"limit,omitempty" jsonschema:"at most this many (default 50)"`
	Mail       bool   `json:"mail,omitempty" jsonschema:"include mail threads (notes, not work), which list leaves out by default"`
	Run        string `json:"run,omitempty" jsonschema:"only threads of this run"`
	Task       string `json:"task,omitempty" jsonschema:"only threads of this task id"`
	Team       string `json:"team,omitempty" jsonschema:"only threads created by or assigned to a member of this team"`
}

type showIn struct {
	Thread   string `json:"thread" jsonschema:"thread id"`
	MarkRead bool   `json:"mark_read,omitempty" jsonschema:"move agent's read cursor to the newest message"`
	Agent    string `json:"agent,omitempty" jsonschema:"whose cursor mark_read moves (default: the server's agent)"`
	MaxBody  int    `json:"max_body_bytes,omitempty" jsonschema:"cut each message body to at most this many bytes (bodies_cut says how many were left out); 0 or absent: whole bodies"`
}

type waitReplyIn struct {
	Thread       string `json:"thread" jsonschema:"thread id"`
	Agent        string `json:"agent,omitempty" jsonschema:"wait after this agent's read cursor and move it (default: the server's agent)"`
	AfterEvent   *int64 `json:"after_event,omitempty" jsonschema:"wait for a message after this event id (next_event_id of the last call)"`
	AfterMessage string `json:"after_message,omitempty" jsonschema:"wait for a message after this message id"`
	Kinds        string `json:"kinds,omitempty" jsonschema:"kinds that count, comma-separated (default answer,control,result)"`
	Types        string `json:"types,omitempty" jsonschema:"seed-002 types that count, comma-separated"`
	RequestID    string `json:"request_id,omitempty" jsonschema:"wait for the response to the request carrying this id"`
	LeaseToken   int64  `json:"lease_token,omitempty" jsonschema:"as the lease holder, keep the lease (renewed while you wait) only while it is this token's"`
	waitIn
}

type watchIn struct {
	Agent      string `json:"agent,omitempty" jsonschema:"whose threads (default: the server's agent)"`
	Status     string `json:"status,omitempty" jsonschema:"statuses that count, comma-separated (default any)"`
	AfterEvent *int64 `json:"after_event,omitempty" jsonschema:"count only events after this id (default: from now)"`
	waitIn
}

type eventsIn struct {
	Thread     string `json:"thread,omitempty" jsonschema:"only this thread's events"`
	AfterEvent *int64 `json:"after_event,omitempty" jsonschema:"only events with a greater id"`
	Limit      *int   `json:"limit,omitempty" jsonschema:"at most this many (default 100)"`
}

type pushIn struct {
	Name           string `json:"name,omitempty" jsonschema:"the task's name, also its agent name (default: generated)"`
	Prompt         string `json:"prompt" flag:",pos" jsonschema:"the task's prompt (its stdin)"`
	Parent         string `json:"parent,omitempty" jsonschema:"who gets the result in its mailbox (default: you)"`
	Model          string `json:"model,omitempty" jsonschema:"model hint, passed as INBOX_MODEL"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"kill the task after this long"`
	queueAgentIn
}

type searchIn struct {
	Query  string `json:"query" flag:",pos" jsonschema:"the words every message found must contain (case-insensitive, whole words; \"quoted phrases\" as phrases)"`
	From   string `json:"from,omitempty" jsonschema:"only messages from this agent"`
	To     string `json:"to,omitempty" jsonschema:"only messages delivered to this agent"`
	Thread string `json:"thread,omitempty" jsonschema:"only messages of this thread"`
	Kind   string `json:"kind,omitempty" jsonschema:"only messages of this kind"`
	Type   string `json:"type,omitempty" jsonschema:"only messages of this seed-002 type"`
	Since  string `json:"since,omitempty" jsonschema:"only messages created since then: a time (RFC 3339) or an age (90m, 12h, 2d)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many (default 20)"`
}

type queueAgentIn struct {
	Agent string `json:"agent,omitempty" jsonschema:"whose queue (default: the server's agent)"`
}

// runIn has no exec: what runs a task is the server's --exec (or
// INBOX_EXEC), never a tool call's (refused below).
type runIn struct {
	Count          int `json:"count,omitempty" flag:",pos" jsonschema:"start up to this many queued tasks (default all)"`
	TimeoutSeconds int `json:"timeout_seconds,omitempty" jsonschema:"default timeout for tasks pushed without one"`
	queueAgentIn
}

type receiveIn struct {
	checkIn
	waitIn
}

type checkIn struct {
	fromIn
	Lifo bool `json:"lifo,omitempty" jsonschema:"newest first"`
	mailAgentIn
}

type mailboxIn struct {
	fromIn
	mailAgentIn
}

type fromIn struct {
	From string `json:"from,omitempty" jsonschema:"only messages from this agent"`
}

type mailAgentIn struct {
	Agent string `json:"agent,omitempty" jsonschema:"whose mailbox (default: the server's agent)"`
}

type queueIn struct {
	All bool `json:"all,omitempty" jsonschema:"every agent's queue"`
	queueAgentIn
}

type noIn struct{}

type teamIn struct {
	teamNameIn
	Member []string `json:"member,omitempty" jsonschema:"members (agent names)"`
	Agent  string   `json:"agent,omitempty" jsonschema:"who makes the change (default: the server's agent)"`
}

type teamNameIn struct {
	Team string `json:"team" flag:",pos" jsonschema:"the team's name"`
}

type ackIn struct {
	Agent   string `json:"agent,omitempty" jsonschema:"who acknowledges (default: the server's agent)"`
	Message string `json:"message" jsonschema:"the id of the message to acknowledge"`
	Thread  string `json:"thread,omitempty" jsonschema:"its thread (found when omitted)"`
	contentIn
}

// Waits an MCP call may block for (SPEC §12).
const (
	defaultMaxWait = 45.0
	maxMaxWait     = 50.0
)

// maxWait is how long a blocking call waits: max_wait_seconds, by
// default 45, at most 50 (no client times out), at least 0.
func maxWait(given *float64) float64 {
	if given == nil {
		return defaultMaxWait
	}
	return min(max(*given, 0), maxMaxWait)
}

// input is one field of a tool's input struct: its name in the schema,
// the flag it is passed as, and where it is in the struct.
type input struct {
	name  string // the JSON name
	flag  string // the flag's name ("" for flag:"-", not passed on)
	pos   bool   // a positional argument, not a flag
	index []int
	typ   reflect.Type
}

// inputs lists the fields of input struct type t, those of embedded
// structs in their place.
func inputs(t reflect.Type) []input {
	var out []input
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			for _, in := range inputs(f.Type) {
				in.index = append([]int{i}, in.index...)
				out = append(out, in)
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		flagName, opt, _ := strings.Cut(f.Tag.Get("flag"), ",")
		switch {
		case flagName == "-":
			flagName = ""
		case flagName == "":
			flagName = strings.ReplaceAll(name, "_", "-")
		}
		out = append(out, input{name: name, flag: flagName, pos: opt == "pos", index: []int{i}, typ: f.Type})
	}
	return out
}

// toArgs turns an input struct into command-line arguments.
func toArgs(in any) []string {
	var flags, pos []string
	v := reflect.ValueOf(in)
	for _, f := range inputs(v.Type()) {
		fv := v.FieldByIndex(f.index)
		if f.flag == "" {
			continue
		}
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		} else if fv.IsZero() {
			continue
		}
		var vals []string
		switch fv.Kind() {
		case reflect.String:
			vals = []string{fv.String()}
		case reflect.Bool:
			vals = []string{strconv.FormatBool(fv.Bool())}
		case reflect.Int, reflect.Int64:
			vals = []string{strconv.FormatInt(fv.Int(), 10)}
		case reflect.Float64:
			vals = []string{strconv.FormatFloat(fv.Float(), 'f', -1, 64)}
		case reflect.Slice:
			for j := range fv.Len() {
				vals = append(vals, fv.Index(j).String())
			}
		}
		for _, s := range vals {
			if f.pos {
				pos = append(pos, s)
			} else {
				flags = append(flags, "--"+f.flag+"="+s)
			}
		}
	}
	if len(pos) > 0 {
		flags = append(append(flags, "--"), pos...)
	}
	return flags
}

// toolSpec is one tool: the command it runs (with leading arguments, such
// as a team verb; by default the tool's name with - for _), what it does
// to the store, whether it blocks, whether it starts a runner, its input
// struct and the type that describes its result (outputs.go).
type toolSpec struct {
	name, desc string
	cmd        []string
	effect     effect
	blocking   bool
	runner     bool
	in, out    reflect.Type
	outSchema  *jsonschema.Schema // out's schema, set when the tool is added
	add        func(m *mcpServer, s *mcp.Server, spec toolSpec)
}

// tool is spec with input struct In and a result described by Out.
func tool[In, Out any](spec toolSpec) toolSpec {
	if spec.cmd == nil {
		spec.cmd = []string{strings.ReplaceAll(spec.name, "_", "-")}
	}
	spec.in, spec.out = reflect.TypeFor[In](), reflect.TypeFor[Out]()
	spec.add = addTool[In]
	return spec
}

// refused are the inputs a tool call may not give, by tool, with why:
// settings that belong to whoever started the server. A call that gives
// one is refused the way the CLI refuses bad input (invalid_input naming
// the field), rather than with the SDK's bare schema error.
var refused = map[string]map[string]string{
	"run": {"exec": "the run tool takes no command: tasks run with the MCP server's own --exec (or INBOX_EXEC), which a tool call cannot set"},
}

// refuseInputs answers a tools/call that gives a refused input with a
// tool error, before the tool runs.
func refuseInputs(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ct, ok := req.(*mcp.CallToolRequest); ok && ct.Params != nil && refused[ct.Params.Name] != nil {
			var args map[string]json.RawMessage
			if json.Unmarshal(ct.Params.Arguments, &args) == nil {
				for field, why := range refused[ct.Params.Name] {
					if _, given := args[field]; given {
						return invalidInput(ct.Params.Name, field, why), nil
					}
				}
			}
		}
		return next(ctx, method, req)
	}
}

// invalidInput is a tool error in the CLI's shape for bad input (exit 30).
func invalidInput(tool, field, msg string) *mcp.CallToolResult {
	type shape struct {
		Code    string `json:"code"`
		Field   string `json:"field"`
		Message string `json:"message"`
	}
	out, _ := json.Marshal(struct {
		OK      bool   `json:"ok"`
		Command string `json:"command"`
		Error   shape  `json:"error"`
	}{false, tool, shape{"invalid_input", field, msg}})
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(out),
		Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, IsError: true}
}

// reapRunner waits in the background for the runner that a run command
// started (runner_pid in its result). The runner is this process's child
// and outlives the command; a long-lived server that never waited for it
// would keep a zombie for every run.
func reapRunner(out []byte) {
	var r struct {
		PID int `json:"runner_pid"`
	}
	if json.Unmarshal(out, &r) != nil || r.PID <= 0 {
		return
	}
	p, err := os.FindProcess(r.PID)
	if err != nil {
		return
	}
	go p.Wait()
}

// addTool registers a tool whose input is In. Its output schema is given
// rather than inferred from the handler's result type (any), so the SDK
// lists it but neither re-encodes nor re-validates a result: the CLI's
// JSON goes out as it is.
func addTool[In any](m *mcpServer, s *mcp.Server, spec toolSpec) {
	t := &mcp.Tool{Name: spec.name, Description: spec.desc, OutputSchema: spec.outSchema, Annotations: spec.effect.annotations()}
	mcp.AddTool(s, t,
		func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			args := append(append([]string{}, spec.cmd[1:]...), toArgs(in)...)
			if spec.blocking {
				var given *float64
				if w := reflect.ValueOf(in).FieldByName("MaxWaitSeconds"); w.IsValid() && !w.IsNil() {
					given = w.Interface().(*float64)
				}
				wait := maxWait(given)
				args = append([]string{"--timeout-seconds=" + strconv.FormatFloat(wait, 'f', -1, 64)}, args...)
				stop := m.progress(ctx, req, spec.name, wait)
				defer stop()
			}
			out, code := m.invoke(ctx, spec.cmd[0], args)
			if spec.runner && code == 0 {
				reapRunner(out)
			}
			res := &mcp.CallToolResult{StructuredContent: json.RawMessage(out),
				Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, IsError: code >= cli.ExitConflict}
			return res, nil, nil
		})
}

// invoke runs the CLI command cmd with args in-process against the
// server's store and returns its JSON output and exit code.
func (m *mcpServer) invoke(ctx context.Context, cmd string, args []string) ([]byte, int) {
	return cli.Invoke(ctx, m.bus, m.getenv, cmd, args)
}

// progress sends a progress notification every few seconds while a
// blocking tool waits, when the client asked for progress.
func (m *mcpServer) progress(ctx context.Context, req *mcp.CallToolRequest, name string, wait float64) (stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		start := time.Now()
		t := time.NewTicker(m.progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				el := time.Since(start).Seconds()
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: el, Total: wait,
					Message: fmt.Sprintf("%s: waiting (%.0fs of at most %gs)", name, el, wait)})
			}
		}
	}()
	return func() { close(done) }
}

// toolTable is every tool, in the order tools/list gives them.
var toolTable = []toolSpec{
	tool[fetchIn, threadsOut](toolSpec{name: "fetch", effect: reads,
		desc: "List threads waiting for you (pending or blocked, assigned to you or offered to your team) without claiming any. Step 1 of the worker loop: fetch, then claim one thread before working on it. Empty threads list means no work."}),
	tool[claimIn, leaseOut](toolSpec{name: "claim", effect: adds,
		desc: "Take the lease on a thread before working on it: exactly one claimer wins (others get lease_conflict). Returns lease.lease_token, a fencing token to pass to update/done/fail. Renew long work before the lease expires (default 900 s)."}),
	tool[renewIn, leaseOut](toolSpec{name: "renew", effect: adds,
		desc: "Extend your lease on a thread you hold, counted from now. Call it before lease_seconds run out during long work."}),
	tool[updateIn, messageOut](toolSpec{name: "update", effect: adds,
		desc: "As the lease holder, post progress (status in_progress) or a blocked question (status blocked, summary says exactly what is missing). After a blocked update, call wait_reply for the answer."}),
	tool[replyIn, messageOut](toolSpec{name: "reply", effect: adds,
		desc: "Append a message inside a thread; anyone may reply. A leader answers a blocked worker (kind answer) or steers it (kind control). With type and request_id it answers a seed-002 request. Never changes the thread's status."}),
	tool[finishIn, messageOut](toolSpec{name: "done", effect: adds,
		desc: "As the lease holder, finish the thread with its result: summary (required) says what was achieved, body holds details. Releases the lease."}),
	tool[finishIn, messageOut](toolSpec{name: "fail", effect: adds,
		desc: "As the lease holder, mark the thread failed: summary (required) says why. Releases the lease."}),
	tool[cancelIn, messageOut](toolSpec{name: "cancel", effect: destroys,
		desc: "Stop a thread (a leader's call), or a queued or running task by name (its process is killed and its parent gets the failure)."}),
	tool[sendIn, messageOut](toolSpec{name: "send", effect: adds,
		desc: "Send a message. With to and message (seed 003): a note in the recipient's mailbox, not work. With subject: a new work thread the recipient fetches and claims. to may be several agents (a,b) or a team (@team). With thread: add to that thread. Typed messages (seed 002): type, content_json, ack_required, request/request_id."}),
	tool[listIn, threadsOut](toolSpec{name: "list", effect: reads,
		desc: "List threads with filters, newest first (a leader's view of everything). Unlike fetch it is not limited to work waiting for one agent."}),
	tool[showIn, showOut](toolSpec{name: "show", effect: addsOnce,
		desc: "Read one thread's full history: header, lease and every message. Without mark_read it changes nothing; mark_read moves your read cursor to the newest message (what it marks leaves your mailbox)."}),
	tool[waitReplyIn, waitReplyOut](toolSpec{name: "wait_reply", effect: adds, blocking: true,
		desc: "Block until an answer (or control, or result) lands in a thread, then return it; at once if one is there already. Waits at most max_wait_seconds (default 45): on woke:false call again with after_event set to next_event_id. request_id waits for the response to that request. While you (agent) hold the thread's lease, the wait renews it."}),
	tool[watchIn, watchOut](toolSpec{name: "watch", effect: reads, blocking: true,
		desc: "Block until one of your threads is created or changes status. Waits at most max_wait_seconds (default 45); on woke:false call again with after_event set to next_event_id."}),
	tool[eventsIn, eventsOut](toolSpec{name: "events", effect: reads, cmd: []string{"events", "--limit=100"},
		desc: "Read the store's event log (every change, in order) after an event id; next_event_id is where to continue."}),
	tool[pushIn, pushOut](toolSpec{name: "push", effect: adds,
		desc: "Queue a task (seed 003): a prompt for a sub-agent, run later by the run tool. Its result arrives in your mailbox (receive/check) as a message from the task's name."}),
	tool[runIn, runOut](toolSpec{name: "run", effect: adds, runner: true,
		desc: "Start up to count queued tasks of your queue in the background (seed 003) and return at once; each runs the command the server was started with (its --exec or INBOX_EXEC) with its prompt on stdin. A tool call cannot choose the command."}),
	tool[receiveIn, receiveOut](toolSpec{name: "receive", effect: adds, blocking: true,
		desc: "Wait for the next message in your mailbox (a task's result, a note, a broadcast) and collect it. Waits at most max_wait_seconds (default 45): woke:false means nothing came; call again."}),
	tool[checkIn, checkOut](toolSpec{name: "check", effect: adds,
		desc: "Collect every message ready in your mailbox now, without waiting (seed 003's check). An empty messages list means none."}),
	tool[mailboxIn, mailboxOut](toolSpec{name: "mailbox", effect: reads,
		desc: "Look at your mailbox without collecting anything, and at the messages you still have to acknowledge."}),
	tool[queueIn, queueOut](toolSpec{name: "queue", effect: addsOnce,
		desc: "Show your task queue: queued, running (with age) and finished tasks. A task whose runner died is recorded as failed on the way (its parent gets the failure)."}),
	tool[searchIn, searchOut](toolSpec{name: "search", effect: reads,
		desc: "Find messages whose subject, summary, body or payload contain every word of query (case-insensitive, whole words; \"quoted phrases\" as phrases), newest first, each with its thread, subject and a snippet; from, to, thread, kind, type and since narrow the search. An empty results list means nothing matched."}),
	tool[noIn, agentsOut](toolSpec{name: "agents", effect: reads,
		desc: "Every agent the store has seen: state (working, waiting, idle, gone), last activity, live leases, mailbox depth, teams and unacknowledged messages. A leader's check on who is alive."}),
	tool[teamIn, teamOut](toolSpec{name: "team_create", effect: adds, cmd: []string{"team", "create"},
		desc: "Create a team (a named set of agents). Send to every member but yourself with to: \"@team\"."}),
	tool[teamIn, teamOut](toolSpec{name: "team_add", effect: addsOnce, cmd: []string{"team", "add"},
		desc: "Add members (agent names) to an existing team; members already in it stay as they are."}),
	tool[teamIn, teamOut](toolSpec{name: "team_remove", effect: destroys, cmd: []string{"team", "remove"},
		desc: "Remove members from a team; each must be a member (else not_a_member)."}),
	tool[teamNameIn, teamShowOut](toolSpec{name: "team_show", effect: reads, cmd: []string{"team", "show"},
		desc: "A team's members and what each has not acknowledged."}),
	tool[noIn, teamListOut](toolSpec{name: "team_list", effect: reads, cmd: []string{"team", "list"},
		desc: "List every team of the store with its members, to find whom @team reaches."}),
	tool[ackIn, messageOut](toolSpec{name: "ack", effect: adds,
		desc: "Acknowledge a message that asked for it (ack_required): an acknowledgment to its sender in the same thread."}),
}

// tools registers every tool on s. Tools whose results one type
// describes share one output schema, which the server's schema cache
// then resolves once.
func (m *mcpServer) tools(s *mcp.Server) {
	schemas := map[reflect.Type]*jsonschema.Schema{}
	for _, spec := range toolTable {
		if schemas[spec.out] == nil {
			out, err := outputSchema(spec.out)
			if err != nil {
				panic(fmt.Sprintf("tool %s: output schema: %v", spec.name, err))
			}
			schemas[spec.out] = out
		}
		spec.outSchema = schemas[spec.out]
		spec.add(m, s, spec)
	}
}
