package inbox

import (
	"context"
	"io"
	"time"
)

// Bus is every operation of the coordination bus (SPEC §4–§8), as the
// front-ends (the CLI, the daemon's intake, the queue runner) perform
// them. A backend implements it: package spool on a directory tree. The
// conformance suite in package bustest checks a backend's semantics
// through this interface alone.
//
// Every method is safe for concurrent use by many goroutines and many
// processes. Errors are *Error values wrapping one of the sentinels
// (ErrInvalidInput, ErrLeaseConflict, …), so that every front-end maps
// them to the same codes.
type Bus interface {
	// Send creates a thread (in.ThreadID empty) or appends a message to
	// one. A retry with the same idempotency key returns the original
	// result (Replayed) and writes nothing.
	Send(ctx context.Context, in SendInput) (*Result, error)
	// SendBatch creates several threads at once, sharing the cost of
	// making them durable: errs[i] refuses ins[i] alone; err fails all.
	SendBatch(ctx context.Context, ins []SendInput) (results []*Result, errs []error, err error)
	// Reply appends a message of kind (ReplyKinds) to a live thread; anyone
	// may reply. An empty to answers the thread's other party.
	Reply(ctx context.Context, from, to, tid, kind string, c Content) (*Result, error)

	// Claim gives agent the thread's lease for leaseSeconds (0: the
	// default), with a lease token larger than every earlier one. Exactly
	// one of concurrent claimers wins; the others get ErrLeaseConflict.
	Claim(ctx context.Context, agent, tid string, leaseSeconds int) (*Result, error)
	// Renew extends the holder's lease. A non-zero token must be the
	// current one (ErrStaleToken otherwise); so for Update, Done and Fail.
	Renew(ctx context.Context, agent, tid string, leaseSeconds int, token int64) (*Result, error)
	// Update posts the holder's progress (StatusInProgress) or blocked
	// question (StatusBlocked, with a summary saying what is missing).
	Update(ctx context.Context, agent, tid, status string, token int64, c Content) (*Result, error)
	// Done and Fail finish the holder's thread with its result.
	Done(ctx context.Context, agent, tid string, token int64, c Content) (*Result, error)
	Fail(ctx context.Context, agent, tid string, token int64, c Content) (*Result, error)
	// Cancel stops a thread, whoever holds it.
	Cancel(ctx context.Context, agent, tid string, c Content) (*Result, error)
	// MarkRead moves agent's read cursor in the thread to message seq
	// (0: the newest).
	MarkRead(ctx context.Context, agent, tid string, seq int) (*Cursor, error)

	// Fetch lists the threads waiting for agent in statuses (default
	// DefaultFetchStatuses) without claiming any: high priority first,
	// then oldest. It never writes.
	Fetch(ctx context.Context, agent string, statuses []string, limit int, unread bool) ([]*Thread, error)
	// List returns the threads f selects, newest first.
	List(ctx context.Context, f ListFilter) ([]*Thread, error)
	// Show returns a thread with its messages, lease and cursors.
	Show(ctx context.Context, tid string) (*ThreadView, error)
	// Thread returns a thread.
	Thread(ctx context.Context, tid string) (*Thread, error)
	// LastMessage returns a thread and its newest message.
	LastMessage(ctx context.Context, tid string) (*Thread, *Message, error)

	// WaitReply blocks until the thread has a message that f matches
	// after the cursor, and returns it; at once when one exists already.
	// On timeout the result has Woke false and the cursor to resume from.
	WaitReply(ctx context.Context, tid string, cur ReplyCursor, f ReplyFilter, opt WaitOptions) (*WaitResult, error)
	// Watch blocks until a thread of agent is created or changes to one of
	// statuses after the event cursor (nil: now).
	Watch(ctx context.Context, agent string, statuses []string, after *int64, opt WaitOptions) (*WaitResult, error)
	// Events calls fn for each event after the id, in order, until fn
	// returns false.
	Events(ctx context.Context, after int64, fn func(ev *Event) bool) error
	// Follow is Events that goes on waiting for new events (of thread tid
	// only, when given) until ctx ends or fn returns false.
	Follow(ctx context.Context, after int64, tid string, opt WaitOptions, fn func(ev *Event) bool) error
	// LastEventID is the id of the newest event (0 when there is none).
	LastEventID(ctx context.Context) (int64, error)

	// Mailbox lists agent's uncollected mail (from one sender, when
	// given) in the order Receive hands it out, collecting nothing.
	Mailbox(ctx context.Context, agent, from string) ([]*MailItem, error)
	// MailPeek is what a hook needs of agent's mailbox, cheaply: how many
	// messages wait, and the newest of them (at most newest, newest
	// first), collecting nothing. The count may include a message whose
	// send is still committing; it never includes one already collected.
	MailPeek(ctx context.Context, agent string, newest int) (total int, items []*MailItem, err error)
	// Collect collects up to max ready messages of agent's mailbox: each
	// is handed to exactly one collector.
	Collect(ctx context.Context, agent, from string, lifo bool, max int) ([]*Message, error)
	// Receive waits for a message in agent's mailbox and collects it; nil
	// when the wait timed out.
	Receive(ctx context.Context, agent, from string, lifo bool, opt WaitOptions) (*Message, error)

	// Push queues a task; its prompt is the first message of its thread.
	Push(ctx context.Context, spec TaskSpec, prompt string) (*Task, error)
	// Tasks lists the tasks f selects, oldest first.
	Tasks(ctx context.Context, f TaskFilter) ([]*Task, error)
	// TaskByName and TaskByThread return a task (ErrNotFound when there
	// is none).
	TaskByName(ctx context.Context, name string) (*Task, error)
	TaskByThread(ctx context.Context, tid string) (*Task, error)
	// StartTask starts a queued task's run: it claims the task's thread
	// as the task's name (StartLease), only if the thread was never
	// claimed. Of concurrent starts exactly one wins; the others, and
	// every later start, get ErrInvalidState: a task runs once.
	StartTask(ctx context.Context, t *Task, leaseSeconds int) (*Result, error)
	// CancelTask cancels a queued task, which then never runs.
	CancelTask(ctx context.Context, agent string, t *Task, c Content) (*Result, error)
	// SetTaskRunner records (nil: forgets) the process running a task,
	// for whoever checks later whether it is still there.
	SetTaskRunner(ctx context.Context, name string, r *TaskRunner) error
	// TaskOutputPath is the file a runner captures the task's standard
	// output in: on the backend's side, so that AdoptBlob can take it.
	TaskOutputPath(ctx context.Context, name string) (string, error)

	// StageBlob stages content too large or not text for a message body
	// or payload; a message carries it through Content.Blobs.
	StageBlob(ctx context.Context, field string, r io.Reader) (*Blob, error)
	// AdoptBlob stages the file at path (from TaskOutputPath), which must
	// no longer change.
	AdoptBlob(ctx context.Context, field, path string) (*Blob, error)
	// OpenBlob opens a blob a message refers to (Blob.Ref,
	// Task.PromptBlob).
	OpenBlob(ctx context.Context, ref string) (io.ReadCloser, error)

	// CreateTeam creates a team (by names who creates it); AddMembers and
	// RemoveMembers change its membership. Each change is an event.
	CreateTeam(ctx context.Context, by, name string, members []string) (*Team, error)
	AddMembers(ctx context.Context, by, name string, members []string) (*Team, error)
	RemoveMembers(ctx context.Context, by, name string, members []string) (*Team, error)
	// Team returns a team (ErrNotFound when there is none); Teams lists
	// every team by name.
	Team(ctx context.Context, name string) (*Team, error)
	Teams(ctx context.Context) ([]*Team, error)
	// Ack acknowledges, as agent, a message that asked agent for an
	// acknowledgment: an acknowledgment message in the message's thread,
	// to its sender. tid may be empty when the bus can find the message.
	// Acknowledging twice returns the first (Replayed).
	Ack(ctx context.Context, agent, messageID, tid string, c Content) (*Result, error)
	// Unacknowledged lists the messages that asked agent for an
	// acknowledgment it has not given, oldest first.
	Unacknowledged(ctx context.Context, agent string) ([]*Message, error)

	// SessionMark returns the mark last recorded for an agent's session
	// (SetSessionMark), "" when none: the per-session cursor of the agent
	// hooks, which tell an agent about the same state once.
	SessionMark(ctx context.Context, agent, session string) (string, error)
	SetSessionMark(ctx context.Context, agent, session, mark string) error

	// Agents lists every agent the bus has seen, with its state.
	Agents(ctx context.Context) ([]*AgentInfo, error)
	// UnknownAgentWarnings warns when name (given as role: "to",
	// "parent", "from") is an agent never seen here, naming close ones.
	UnknownAgentWarnings(ctx context.Context, role, name string) []string
	// Waiting records that this process blocks for agent (AgentInfo's
	// "waiting") until release is called.
	Waiting(ctx context.Context, agent string) (release func())
	// WaitingOn records, as Waiting does for w.Agent, that this process
	// waits on what w names (a reply in a thread, mail from an agent)
	// until release is called; Waits lists the waits so recorded that are
	// in progress (their process is still there), oldest first, with
	// their Since set: the wait graph's wait_reply and receive edges.
	WaitingOn(ctx context.Context, w WaitInfo) (release func())
	Waits(ctx context.Context) ([]WaitInfo, error)
	// FollowPresence calls fn after every change of who waits (Waiting,
	// WaitingOn): a wait that starts, one that is released, and one whose
	// process died while waiting, until ctx ends; then it returns nil.
	// The first call comes once it is armed: every change after that
	// call began is followed by a later call, made once Agents and Waits
	// read the change. Calls come from one goroutine, one at a time;
	// changes during a call give one more call after it, not one each.
	// A call may be spurious (nothing a reader sees changed). It returns
	// an error, without calling fn, only when it cannot follow at all.
	// opt.ForcePoll and opt.OnFallback are as for Follow; the other
	// options are ignored.
	FollowPresence(ctx context.Context, opt WaitOptions, fn func()) error

	// HeldLeases lists the unreleased leases and when they end.
	HeldLeases(ctx context.Context) ([]LeaseExpiry, error)
	// ExpireLease releases a lease that has run out and makes its thread
	// claimable again (a lease_expired event); false if it had not.
	ExpireLease(ctx context.Context, tid string) (bool, error)
	// LockDaemon makes the caller the bus's one daemon (holder names it
	// in the error another caller gets) until release.
	LockDaemon(ctx context.Context, holder string) (release func(), err error)

	// Fsck checks every invariant, and repairs what it can with repair.
	Fsck(ctx context.Context, repair bool) (*FsckReport, error)
	// Reindex rebuilds derived data and returns how many threads it saw.
	Reindex(ctx context.Context) (int, error)
	// Archive moves finished threads last changed before olderThan out of
	// the live data.
	Archive(ctx context.Context, olderThan time.Duration, statuses []string) (*ArchiveResult, error)
	// Stats counts threads by status and agent.
	Stats(ctx context.Context) (*Stats, error)
	// Search finds the messages of live threads that f selects, newest
	// first (SPEC §16).
	Search(ctx context.Context, f SearchFilter) ([]*SearchHit, error)
}
