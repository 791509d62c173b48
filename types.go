package inbox

import (
	"encoding/json"
	"time"
)

// Thread statuses (SPEC §3). Done, failed and cancelled are terminal.
const (
	StatusPending    = "pending"
	StatusClaimed    = "claimed"
	StatusInProgress = "in_progress"
	StatusBlocked    = "blocked"
	StatusDone       = "done"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// Statuses lists every thread status in lifecycle order.
var Statuses = []string{StatusPending, StatusClaimed, StatusInProgress, StatusBlocked,
	StatusDone, StatusFailed, StatusCancelled}

// Message kinds (SPEC §3).
const (
	KindTask     = "task"
	KindProgress = "progress"
	KindQuestion = "question"
	KindAnswer   = "answer"
	KindResult   = "result"
	KindControl  = "control"
	KindEvent    = "event"
)

// Kinds lists every message kind.
var Kinds = []string{KindTask, KindProgress, KindQuestion, KindAnswer, KindResult, KindControl, KindEvent}

// ReplyKinds are the kinds `reply` may append.
var ReplyKinds = []string{KindAnswer, KindQuestion, KindProgress, KindControl}

// Priorities, highest first.
var Priorities = []string{"high", "normal", "low"}

// Event types appended to the event log.
const (
	EventThreadCreated   = "thread_created"
	EventMessageAdded    = "message_added"
	EventThreadClaimed   = "thread_claimed"
	EventLeaseRenewed    = "lease_renewed"
	EventThreadUpdated   = "thread_updated"
	EventThreadDone      = "thread_done"
	EventThreadFailed    = "thread_failed"
	EventThreadCancelled = "thread_cancelled"
	EventLeaseExpired    = "lease_expired"
	EventThreadRead      = "thread_read"
	// EventLost stands, after fsck --repair, for an event that was
	// damaged in the log and that nothing else records.
	EventLost = "event_lost"
)

// IsTerminal reports whether status admits no further transitions.
func IsTerminal(status string) bool {
	return status == StatusDone || status == StatusFailed || status == StatusCancelled
}

// Thread is the durable container for one work conversation.
type Thread struct {
	ThreadID   string `json:"thread_id"`
	RunID      string `json:"run_id"`
	TaskID     string `json:"task_id"`
	Subject    string `json:"subject"`
	CreatedBy  string `json:"created_by"`
	AssignedTo string `json:"assigned_to"`
	// Recipients, on a thread sent to several agents or a team, are the
	// agents it is offered to: it is assigned to none of them and shows
	// in each one's fetch until one claims it.
	Recipients      []string `json:"recipients,omitempty"`
	Status          string   `json:"status"`
	Priority        string   `json:"priority"`
	LatestMessageID string   `json:"latest_message_id"`
	CreatedAt       string   `json:"created_at"`
	UpdatedAt       string   `json:"updated_at"`
	MessageCount    int      `json:"message_count"`
	LastEventID     int64    `json:"last_event_id"`
	// Mail marks a thread that is not work: a message whose kind is not
	// task, sent to an agent's mailbox (SPEC 7 "Mail is not work"). It
	// shows in no one's fetch and cannot be claimed.
	Mail bool `json:"mail,omitempty"`
	// LeaseExpired is set, when a thread is read, on a thread whose lease
	// ran out without being released: it is claimable again, whatever its
	// status still says (SPEC 4). It is never stored.
	LeaseExpired bool `json:"lease_expired,omitempty"`
}

// Artifact is a reference to a file attached to a message. The path is
// stored as given; the file is never opened or copied.
type Artifact struct {
	ArtifactID   string          `json:"artifact_id"`
	MessageID    string          `json:"message_id"`
	Path         string          `json:"path"`
	Kind         string          `json:"kind"`
	MetadataJSON json.RawMessage `json:"metadata_json"`
	CreatedAt    string          `json:"created_at"`
}

// Message is one immutable entry of a thread.
type Message struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
	Seq       int    `json:"seq"`
	FromAgent string `json:"from_agent"`
	ToAgent   string `json:"to_agent"`
	// Recipients are the agents a message addressed to several agents or
	// a team was delivered to; ToAgent keeps what the sender gave ("a,b",
	// "@team").
	Recipients []string `json:"recipients,omitempty"`
	Kind       string   `json:"kind"`
	// Type is the seed-002 type of a typed message (task_assignment, …).
	Type        string          `json:"type,omitempty"`
	Summary     string          `json:"summary"`
	Body        string          `json:"body"`
	PayloadJSON json.RawMessage `json:"payload_json"`
	CreatedAt   string          `json:"created_at"`
	// EventID is the id of the event that added the message: the cursor
	// to pass as --after-event to wait for what comes after it.
	EventID   int64      `json:"event_id"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Status is the thread status this message moved the thread to, when
	// it was written by update, done, fail or cancel.
	Status string `json:"status,omitempty"`
	// Damaged marks what stands in for a message whose file was damaged:
	// what the event log still knows of it (id, sender, kind, summary),
	// without its body. Readers get one while the file is damaged; fsck
	// --repair sets the file aside (.bad) and writes one in its place.
	Damaged bool `json:"damaged,omitempty"`
	// RequestID pairs a request with its responses: the first message of
	// a thread that carries it is the request, later ones answer it.
	RequestID string `json:"request_id,omitempty"`
	// AckID, on a message that asks for acknowledgment, is the id an
	// acknowledgment names (in its content's "ackId").
	AckID string `json:"ack_id,omitempty"`
	// Timestamp is the sender's own time, for a message taken from a
	// seed-002 line whose timestamp is not CreatedAt.
	Timestamp string `json:"timestamp,omitempty"`
	// Extra holds the members of a seed-002 line that have no field of
	// their own, so that the line can be written out again unchanged.
	Extra json.RawMessage `json:"extra,omitempty"`
}

// Lease is an exclusive, expiring claim on a thread. LeaseToken increases
// with every grant on the thread and fences out earlier holders.
type Lease struct {
	ThreadID   string `json:"thread_id"`
	AgentID    string `json:"agent_id"`
	LeaseToken int64  `json:"lease_token"`
	ClaimedAt  string `json:"claimed_at"`
	ExpiresAt  string `json:"expires_at"`
	// ReleasedAt is when done, fail, cancel or expiry ended the lease; nil
	// while it has not been released.
	ReleasedAt *string `json:"released_at"`
	// LeaseSeconds is the length the lease was claimed or last renewed
	// with, which a holder's wait renews it for (SPEC §4); 0 in a lease
	// written before it was recorded (LeaseLength works it out then).
	LeaseSeconds int `json:"lease_seconds,omitempty"`
}

// Released reports whether the lease was released.
func (l *Lease) Released() bool { return l.ReleasedAt != nil }

// Release marks the lease released at t.
func (l *Lease) Release(t string) { l.ReleasedAt = &t }

// Live reports whether the lease is held at time now.
func (l *Lease) Live(now time.Time) bool {
	if l == nil || l.AgentID == "" || l.Released() {
		return false
	}
	exp, err := ParseTime(l.ExpiresAt)
	return err == nil && now.Before(exp)
}

// Cursor is an agent's read position in a thread.
type Cursor struct {
	ThreadID          string `json:"thread_id"`
	AgentID           string `json:"agent_id"`
	LastReadMessageID string `json:"last_read_message_id"`
	LastReadSeq       int    `json:"last_read_seq"`
	ReadAt            string `json:"read_at"`
}

// Event is one line of the append-only event log.
type Event struct {
	EventID     int64           `json:"event_id"`
	RunID       string          `json:"run_id"`
	TaskID      string          `json:"task_id"`
	ThreadID    string          `json:"thread_id"`
	Source      string          `json:"source"`
	EventType   string          `json:"event_type"`
	MessageID   string          `json:"message_id"`
	Summary     string          `json:"summary"`
	PayloadJSON json.RawMessage `json:"payload_json"`
	CreatedAt   string          `json:"created_at"`
	// Agent is who caused the event; Kind the kind of the message it adds
	// (if any); Status the thread's status after it.
	Agent string `json:"agent,omitempty"`
	Kind  string `json:"kind,omitempty"`
	// Type is the seed-002 type of the message the event adds, if typed.
	Type   string `json:"type,omitempty"`
	Status string `json:"status,omitempty"`
}

// Origin identifies the intake descriptor a thread was created from: its
// file name and the SHA-256 of its content.
type Origin struct {
	Descriptor string `json:"descriptor"`
	SHA256     string `json:"sha256"`
}
