package inbox

import "time"

// The inputs and results of the operations of Bus.

// Result is what a mutating call returns.
type Result struct {
	Thread  *Thread  `json:"thread,omitempty"`
	Message *Message `json:"message,omitempty"`
	Lease   *Lease   `json:"lease,omitempty"`
	// Replayed is true when an idempotency key matched an earlier call:
	// nothing was written and Message is the one that call wrote.
	Replayed bool `json:"replayed,omitempty"`
	// Warnings are things the caller should know, such as a recipient the
	// store has never seen act.
	Warnings []string `json:"warnings,omitempty"`
}

// ArtifactInput is a file reference to attach to a message.
type ArtifactInput struct {
	Path         string
	Kind         string // default "file"
	MetadataJSON string // default {}
}

// Content is the text a message carries.
type Content struct {
	Summary string
	// Body and PayloadJSON larger than MaxInline are stored as blobs.
	Body        string
	PayloadJSON string
	Artifacts   []ArtifactInput
	// Blobs are staged blobs (StageBlob, AdoptBlob) the message carries,
	// each as an artifact of kind blob. The call consumes them: a staged
	// temp file is gone when it returns, committed or not.
	Blobs          []*Blob
	IdempotencyKey string

	// Seed 002's protocol (SPEC §10). Type is the message's type; its
	// content is PayloadJSON.
	Type string
	// RequestID makes the message a request (or, in reply, a response);
	// Request asks for a generated one.
	RequestID string
	Request   bool
	// AckRequired asks each recipient to acknowledge (inbox ack); AckID is
	// the id acknowledgments name (default: the message id).
	AckRequired bool
	AckID       string
	// Timestamp and Extra carry a seed-002 line's own time and its other
	// members (see Message).
	Timestamp string
	Extra     []byte
}

// SendInput describes a send: a new thread when ThreadID is empty, else a
// message appended to that thread.
type SendInput struct {
	From, To, Subject, ThreadID, RunID, TaskID, Kind, Priority string
	Content
	// Origin, for a new thread, records the intake descriptor it came from.
	Origin *Origin
}

// DefaultLeaseSeconds is the lease length when a caller gives none.
const DefaultLeaseSeconds = 900

// Blob is content on its way into the store as a blob, staged by
// StageBlob or AdoptBlob. A message carries it through Content.Blobs; the
// call that takes the message consumes it, committed or not.
type Blob struct {
	// Field says what the blob holds: "body", "payload_json", or a
	// payload member such as "partial_output".
	Field  string
	SHA256 string
	Size   int64
	// Staged is the backend's own handle on the staged content.
	Staged any
}

// Ref names the blob as its artifact's metadata does: "blobs/<sha256>".
func (b *Blob) Ref() string { return "blobs/" + b.SHA256 }

// Limits on how many threads one fetch or list returns.
const (
	DefaultFetchLimit = 20
	DefaultListLimit  = 50
	MaxLimit          = 10000
)

// DefaultFetchStatuses are the statuses fetch looks at by default.
var DefaultFetchStatuses = []string{StatusPending, StatusBlocked}

// ListFilter selects threads for List. Empty fields do not filter.
type ListFilter struct {
	Agent      string // assigned to or created by this agent
	CreatedBy  string
	AssignedTo string
	Statuses   []string
	Limit      int
	// Mail includes mail threads, which are not work (SPEC §7): left
	// out unless asked.
	Mail bool
	// RunID and TaskID keep only the threads of that run or task.
	RunID, TaskID string
	// Members keeps only the threads created by or assigned to one of
	// them (a team's members); nil means any agent, an empty non-nil
	// slice none.
	Members []string
}

// ThreadView is one thread with its full history.
type ThreadView struct {
	Thread   *Thread
	Messages []*Message
	// Lease is the thread's lease (live, expired or released), nil if the
	// thread was never claimed.
	Lease *Lease
	// Archived is true for a thread moved out of the live tree by archive.
	Archived bool
	// Origin is the intake descriptor the thread came from, if any.
	Origin *Origin
}

// DefaultWaitKinds are the message kinds wait-reply wakes for by default.
var DefaultWaitKinds = []string{KindAnswer, KindControl, KindResult}

// WaitOptions tune a blocking call.
type WaitOptions struct {
	// Timeout bounds the wait; 0 checks once and returns.
	Timeout time.Duration
	// ForcePoll polls instead of using file-system notifications.
	ForcePoll bool
	// OnFallback is called once if the wait has to poll, with the reason.
	OnFallback func(reason error)
	// ExitSoon says the caller exits right after the wait (a CLI call); see
	// watcher.Options.ExitSoon.
	ExitSoon bool
	// Every, when set with Tick, makes the wait call Tick at that interval
	// and check again: for conditions no file change announces, such as a
	// task runner dying.
	Every time.Duration
	Tick  func()
	// Agent is who the wait is for, when the caller knows (wait-reply
	// with --agent, watch, receive): while it blocks, Agents reports that
	// agent "waiting".
	Agent string
	// AfterCheck, when set (tests only), runs after every unsuccessful
	// check, before arming the watch or waiting: the windows where a lost
	// wake-up would hide.
	AfterCheck func()
}

// ReplyCursor says what wait-reply waits after: a message of the thread
// (AfterMessage), an event id (AfterEvent, when HasEvent), or neither: the
// read cursor of Agent in the thread when Agent is set, else the thread's
// last question or blocked update, or its newest message when the wait
// starts if it has no question (ReplyWait.Start).
type ReplyCursor struct {
	AfterMessage string
	AfterEvent   int64
	HasEvent     bool
	// Agent, with neither cursor given, waits after that agent's read
	// cursor, and the message the wait returns moves the cursor to it: an
	// answer that landed just before the wait is returned, and never
	// twice.
	Agent string
	// LeaseToken, when not 0, is the token Agent claims to hold the
	// thread's lease with: a holder's wait keeps its lease (SPEC §4) only
	// when the token is the lease's.
	LeaseToken int64
}

// ReplyFilter says which messages wait-reply wakes for: one of Kinds
// (default DefaultWaitKinds, or any kind when Types or RequestID is
// given), of one of Types when given, and answering RequestID when given
// (a later message of the thread carrying the request's id).
type ReplyFilter struct {
	Kinds     []string
	Types     []string
	RequestID string
}

// WaitResult is what a blocking call found.
type WaitResult struct {
	Woke bool
	// NextEventID is the cursor to continue from: the event of what woke
	// the call or, after a timeout, the furthest point it has verified
	// holds nothing that matches.
	NextEventID int64
	Message     *Message // wait-reply
	Event       *Event   // watch
	Thread      *Thread  // watch: the thread the event is about
}

// TaskSpec defines a queued task.
type TaskSpec struct {
	Name string `json:"name"`
	// Parent gets the task's result in its mailbox.
	Parent string `json:"parent"`
	// Owner is whose queue the task is in: the agent that pushed it
	// (SPEC 7 "Queue ownership"). Tasks pushed before owners were
	// recorded belong to their parent's queue.
	Owner          string `json:"owner,omitempty"`
	Model          string `json:"model,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

// Task is a queued, running or finished task.
type Task struct {
	TaskSpec
	Prompt string `json:"prompt"`
	// PromptBlob is the blob (OpenBlob) holding a prompt too large to store inline
	// (Prompt is then empty).
	PromptBlob string `json:"prompt_blob,omitempty"`
	ThreadID   string `json:"thread_id"`
	Status     string `json:"status"` // the thread's
	CreatedAt  string `json:"created_at"`
	UpdatedAt  string `json:"updated_at"`
	// StartedAt is when the task was claimed to run, if it was.
	StartedAt  string `json:"started_at,omitempty"`
	LeaseToken int64  `json:"lease_token,omitempty"`
	// Runner is the process running the task, as its runner recorded it
	// (SetTaskRunner); nil when none is recorded.
	Runner *TaskRunner `json:"runner,omitempty"`
}

// TaskRunner is the process that runs a task: the runner (its pid, and
// its start time in clock ticks since boot, which tells it from a later
// process with the same pid) and the task's process group.
type TaskRunner struct {
	RunnerPID   int    `json:"runner_pid"`
	RunnerStart int64  `json:"runner_start"`
	PGID        int    `json:"pgid"`
	StartedAt   string `json:"started_at"`
}

// State is the task's place in the queue: queued, running or finished.
// A task that started stays running until it finished, also when its
// lease lapsed and its thread went back to pending (its runner died): it
// is never started again, and Reap reports it failed.
func (t *Task) State() string {
	switch {
	case t.Status == StatusPending && t.StartedAt == "":
		return "queued"
	case IsTerminal(t.Status):
		return "finished"
	}
	return "running"
}

// TaskFilter selects tasks; empty fields do not filter.
type TaskFilter struct {
	Owner  string // in this agent's queue
	Parent string // whose results go to this agent
}

// Agent states reported by Agents.
const (
	StateWorking = "working" // holds a live lease
	StateWaiting = "waiting" // a process is blocked for it now
	StateIdle    = "idle"
	StateGone    = "gone" // held a lease or waited, and its process is gone
)
