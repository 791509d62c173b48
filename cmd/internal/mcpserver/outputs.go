package mcpserver

import (
	"encoding/json"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inbox-dev/inbox"
)

// What tools/list says of a tool's result and effects. A tool's
// structured result is its CLI command's JSON (cli.Invoke's bytes, passed
// on untouched); the types below describe it, and the output schema is
// inferred from them as the SDK infers one (jsonschema.For, the package
// mcp.AddTool uses), the jsonschema tags giving the descriptions. Store
// records are described by their own types (inbox.Thread, inbox.Message,
// …), which their JSON codecs are generated from. Every result has ok
// and command; the others are absent from a failure, which has error
// instead, so only ok and command are required at the top. Objects accept
// keys the schema does not name, so that a client holding an older schema
// keeps working when a command's JSON grows; outputs_test.go checks that
// each key a result carries is described.

// outBase is what every result has.
type outBase struct {
	OK          bool     `json:"ok" jsonschema:"true when the command succeeded (woke:false and an empty list are successes); false with error when it failed"`
	Command     string   `json:"command" jsonschema:"the CLI command that ran"`
	Interrupted bool     `json:"interrupted,omitempty" jsonschema:"true when the call was cancelled before it finished"`
	Error       outError `json:"error,omitzero" jsonschema:"the failure (ok false): a stable code, a message that says what to do, and the input at fault"`
}

// outError is a failure, in the CLI's error shape.
type outError struct {
	Code    string `json:"code" jsonschema:"stable error code: invalid_input, not_found, lease_conflict, invalid_state, …"`
	Message string `json:"message" jsonschema:"what went wrong and what to do instead"`
	Field   string `json:"field,omitempty" jsonschema:"the input at fault (the flag's name, - for _)"`
	Hint    string `json:"hint,omitempty" jsonschema:"a line of advice"`
}

type threadsOut struct {
	outBase
	Threads  []*inbox.Thread `json:"threads,omitempty" jsonschema:"the threads, each a header (thread_id, subject, status, assigned_to, …); empty when none match"`
	Warnings []string        `json:"warnings,omitempty" jsonschema:"what may be a mistake (an agent never seen before, …)"`
}

type leaseOut struct {
	outBase
	Thread   *inbox.Thread `json:"thread,omitempty" jsonschema:"the thread's header after the call"`
	Lease    *inbox.Lease  `json:"lease,omitempty" jsonschema:"your lease: lease_token (the fencing token to pass to update, done and fail) and expires_at"`
	Warnings []string      `json:"warnings,omitempty" jsonschema:"what may be a mistake though the call succeeded (the thread was assigned to another agent, …)"`
}

// messageOut is the result of a call that wrote a message.
type messageOut struct {
	outBase
	Thread   *inbox.Thread  `json:"thread,omitempty" jsonschema:"the thread's header after the call"`
	Message  *inbox.Message `json:"message,omitempty" jsonschema:"the message written (message_id, event_id, …)"`
	Lease    *inbox.Lease   `json:"lease,omitempty" jsonschema:"the lease, when the call changed it"`
	Replayed bool           `json:"replayed,omitempty" jsonschema:"true when idempotency_key matched an earlier call: its result, nothing written"`
	Warnings []string       `json:"warnings,omitempty" jsonschema:"what may be a mistake though the call succeeded (an agent never seen before, …)"`
}

type showOut struct {
	outBase
	Thread   *inbox.Thread    `json:"thread,omitempty" jsonschema:"the thread's header"`
	Messages []*inbox.Message `json:"messages,omitempty" jsonschema:"every message, oldest first"`
	Lease    *inbox.Lease     `json:"lease,omitempty" jsonschema:"the lease, null when the thread was never claimed"`
	Archived bool             `json:"archived,omitempty" jsonschema:"true when the thread is archived"`
	Origin   *inbox.Origin    `json:"origin,omitempty" jsonschema:"the intake descriptor the thread came from"`
	Cursor   *inbox.Cursor    `json:"cursor,omitempty" jsonschema:"your read cursor after mark_read"`
	Cut      []bodyCutOut     `json:"bodies_cut,omitempty" jsonschema:"the messages whose body max_body_bytes cut, with how many bytes were left out"`
}

// bodyCutOut is a message whose body show cut.
type bodyCutOut struct {
	MessageID string `json:"message_id" jsonschema:"the message"`
	LeftOut   int    `json:"bytes_left_out" jsonschema:"how many bytes of its body were left out"`
}

type waitReplyOut struct {
	outBase
	Woke        bool           `json:"woke,omitempty" jsonschema:"true when a message answered; false when max_wait_seconds passed first"`
	NextEventID int64          `json:"next_event_id,omitempty" jsonschema:"the cursor: on woke false call again with after_event set to it"`
	Message     *inbox.Message `json:"message,omitempty" jsonschema:"the answer (woke true)"`
}

type watchOut struct {
	outBase
	Woke        bool          `json:"woke,omitempty" jsonschema:"true when something happened; false when max_wait_seconds passed first"`
	NextEventID int64         `json:"next_event_id,omitempty" jsonschema:"the cursor: call again with after_event set to it"`
	Event       *inbox.Event  `json:"event,omitempty" jsonschema:"what happened (woke true)"`
	Thread      *inbox.Thread `json:"thread,omitempty" jsonschema:"the thread it happened to (woke true)"`
}

type eventsOut struct {
	outBase
	Events      []*inbox.Event `json:"events,omitempty" jsonschema:"the events, oldest first"`
	NextEventID int64          `json:"next_event_id,omitempty" jsonschema:"where to continue: pass it as after_event"`
}

// taskOut is a task as push and queue show it.
type taskOut struct {
	Name           string `json:"name" jsonschema:"the task's name, also its agent name"`
	Owner          string `json:"owner" jsonschema:"whose queue it is in"`
	Parent         string `json:"parent" jsonschema:"who gets its result"`
	ThreadID       string `json:"thread_id" jsonschema:"its thread"`
	State          string `json:"state" jsonschema:"queued, running or finished"`
	Status         string `json:"status" jsonschema:"its thread's status"`
	CreatedAt      string `json:"created_at" jsonschema:"when it was pushed"`
	Model          string `json:"model,omitempty" jsonschema:"its model hint"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"its timeout"`
	StartedAt      string `json:"started_at,omitempty" jsonschema:"when it started (running)"`
	AgeSeconds     int    `json:"age_seconds,omitempty" jsonschema:"how long it has run (running)"`
	Success        bool   `json:"success,omitempty" jsonschema:"whether it succeeded (finished)"`
	FinishedAt     string `json:"finished_at,omitempty" jsonschema:"when it finished (finished)"`
}

type pushOut struct {
	outBase
	Task     taskOut  `json:"task,omitzero" jsonschema:"the task queued"`
	Warnings []string `json:"warnings,omitempty" jsonschema:"what may be a mistake (a parent never seen before, …)"`
}

type runOut struct {
	outBase
	Started     []string `json:"started,omitempty" jsonschema:"the tasks this run takes, by name: running now, or started as a slot frees (count)"`
	Running     []string `json:"running,omitempty" jsonschema:"the tasks running when run returned (queue shows them running)"`
	Concurrency int      `json:"concurrency,omitempty" jsonschema:"how many run at once"`
	RunnerPID   int      `json:"runner_pid,omitempty" jsonschema:"the detached runner's process id"`
}

type receiveOut struct {
	outBase
	Woke         bool           `json:"woke,omitempty" jsonschema:"true when a message came; false when max_wait_seconds passed first: call again"`
	Message      *inbox.Message `json:"message,omitempty" jsonschema:"the message collected (null when woke is false)"`
	TaskFinished bool           `json:"task_finished,omitempty" jsonschema:"true when from names a task that finished and nothing from it waits: nothing more will come, do not call again"`
	Warnings     []string       `json:"warnings,omitempty" jsonschema:"what may be a mistake (from names an agent never seen, …)"`
}

type checkOut struct {
	outBase
	Messages []*inbox.Message `json:"messages,omitempty" jsonschema:"the messages collected; empty when none were ready"`
	Warnings []string         `json:"warnings,omitempty" jsonschema:"what may be a mistake (from names an agent never seen, …)"`
}

type mailboxOut struct {
	outBase
	Agent          string           `json:"agent,omitempty" jsonschema:"whose mailbox"`
	Messages       []*inbox.Message `json:"messages,omitempty" jsonschema:"the messages waiting, none collected"`
	Unacknowledged []*inbox.Message `json:"unacknowledged,omitempty" jsonschema:"messages that asked you for an acknowledgment you have not sent (ack tool)"`
	Warnings       []string         `json:"warnings,omitempty" jsonschema:"what may be a mistake (from names an agent never seen, …)"`
}

type queueOut struct {
	outBase
	All      bool      `json:"all,omitempty" jsonschema:"true when every agent's queue is shown"`
	Agent    string    `json:"agent,omitempty" jsonschema:"whose queue"`
	Queued   []taskOut `json:"queued,omitempty" jsonschema:"tasks waiting to run"`
	Running  []taskOut `json:"running,omitempty" jsonschema:"tasks running, with age_seconds"`
	Finished []taskOut `json:"finished,omitempty" jsonschema:"tasks finished, with success"`
}

type searchOut struct {
	outBase
	Results []*inbox.SearchHit `json:"results,omitempty" jsonschema:"the messages found, newest first, each with thread_id, subject and snippet"`
}

type agentsOut struct {
	outBase
	Agents []*inbox.AgentInfo `json:"agents,omitempty" jsonschema:"every agent the store has seen"`
}

type teamOut struct {
	outBase
	Team *inbox.Team `json:"team,omitempty" jsonschema:"the team after the call"`
}

// memberOut is a member as team show gives it.
type memberOut struct {
	Agent          string   `json:"agent" jsonschema:"the member"`
	Unacknowledged []string `json:"unacknowledged" jsonschema:"ids of the messages it has not acknowledged"`
}

type teamShowOut struct {
	outBase
	Team    *inbox.Team `json:"team,omitempty" jsonschema:"the team"`
	Members []memberOut `json:"members,omitempty" jsonschema:"each member with what it has not acknowledged"`
}

type teamListOut struct {
	outBase
	Teams []*inbox.Team `json:"teams,omitempty" jsonschema:"every team with its members"`
}

// outputSchema is the output schema of a tool whose result Out describes.
func outputSchema(out reflect.Type) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(out, &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		// A payload, artifact metadata, a record's extra keys: any JSON value.
		reflect.TypeFor[json.RawMessage](): {Description: "any JSON value"},
	}})
	if err != nil {
		return nil, err
	}
	openObjects(s)
	return s, nil
}

// openObjects lets every object of s carry keys s does not name.
func openObjects(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if s.Type == "object" || s.AdditionalProperties != nil {
		s.AdditionalProperties = nil
	}
	for _, p := range s.Properties {
		openObjects(p)
	}
	openObjects(s.Items)
}

// effect is what a tool does to the store, for its annotations.
type effect int

const (
	// reads never writes.
	reads effect = iota
	// adds writes without taking anything away; a repeat writes again.
	adds
	// addsOnce writes without taking anything away; a repeat with the
	// same inputs changes nothing more.
	addsOnce
	// destroys may end or take away what others rely on.
	destroys
)

// annotations are a tool's hints: none reaches beyond the store.
func (e effect) annotations() *mcp.ToolAnnotations {
	no := false
	a := &mcp.ToolAnnotations{OpenWorldHint: &no}
	switch e {
	case reads:
		a.ReadOnlyHint = true
	case adds:
		a.DestructiveHint = &no
	case addsOnce:
		a.DestructiveHint, a.IdempotentHint = &no, true
	case destroys:
		yes := true
		a.DestructiveHint = &yes
	}
	return a
}
