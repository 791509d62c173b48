package inbox

import "time"

// EditDistance is the Levenshtein distance between a and b, in bytes: how
// many insertions, deletions or substitutions turn one into the other.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// AgentInfo is what the store knows of an agent.
type AgentInfo struct {
	Agent string `json:"agent"`
	// State is StateWorking, StateWaiting, StateIdle or StateGone.
	State string `json:"state"`
	// LastSeen is the last time the store saw the agent in any role: it
	// acted, was sent mail, or waited.
	LastSeen string `json:"last_seen"`
	// LastActivity is when it last acted; nil if it never has (it has
	// only been sent or assigned work).
	LastActivity *string  `json:"last_activity"`
	LiveLeases   []string `json:"live_leases"`
	MailboxDepth int      `json:"mailbox_depth"`
	Assigned     int      `json:"open_threads"`
	// Teams are the teams it is a member of.
	Teams []string `json:"teams"`
	// Unacknowledged are the messages that asked it for an
	// acknowledgment it has not given (inbox ack).
	Unacknowledged []string `json:"unacknowledged"`
	// IdleSince and IdleReason are set while its newest act is an
	// idle_notification (seed 002): when it sent it and the reason its
	// content gave.
	IdleSince  string `json:"idle_since,omitempty"`
	IdleReason string `json:"idle_reason,omitempty"`
}

// Finding is one thing fsck found wrong with a store.
type Finding struct {
	// Check names the invariant: torn_event_log, corrupt_event_log,
	// event_order, stray_temp_file, incomplete_thread, unreadable_thread,
	// orphan_message, missing_message, stale_header, missing_event,
	// bad_lease, missing_index, stale_index, stale_idempotency_record,
	// stale_mailbox_entry, stale_task, orphan_blob, missing_blob,
	// damaged_blob, stale_ack_entry, missing_ack_entry, stale_team, damaged_search_index, stale_search_index.
	Check    string `json:"check"`
	ThreadID string `json:"thread_id,omitempty"`
	Path     string `json:"path,omitempty"`
	Detail   string `json:"detail"`
	Repaired bool   `json:"repaired"`
}

// FsckReport is what fsck looked at and found.
type FsckReport struct {
	Threads  int       `json:"threads"`
	Messages int       `json:"messages"`
	Events   int       `json:"events"`
	Findings []Finding `json:"findings"`
}

// Clean reports whether nothing is left unrepaired.
func (r *FsckReport) Clean() bool {
	for _, f := range r.Findings {
		if !f.Repaired {
			return false
		}
	}
	return true
}

// MailItem is a message waiting in a mailbox.
type MailItem struct {
	Message *Message `json:"message"`
	// DeliveredAt is when the message was written.
	DeliveredAt string `json:"delivered_at"`
	// Priority is its thread's priority.
	Priority string `json:"priority"`
}

// ArchiveResult says what Archive moved.
type ArchiveResult struct {
	Cutoff   string   `json:"cutoff"`
	Threads  []string `json:"archived_threads"`
	Segments []string `json:"archived_segments"`
}

// Stats is what an operator looks at first.
type Stats struct {
	Threads         int                       `json:"threads"`
	ByStatus        map[string]int            `json:"by_status"`
	ByAgent         map[string]map[string]int `json:"by_agent"`
	ArchivedThreads int                       `json:"archived_threads"`
	StoreBytes      int64                     `json:"store_bytes"`
	EventLogBytes   int64                     `json:"event_log_bytes"`
	EventSegments   int                       `json:"event_log_segments"`
	LastEventID     int64                     `json:"last_event_id"`
	OldestPending   *Thread                   `json:"oldest_pending"`
	// MailThreads counts the live threads that are mail, not work (SPEC
	// §7): they are in no other count.
	MailThreads int `json:"mail_threads"`
}

// Count adds a live thread to the counts: a mail thread to MailThreads
// only, work to Threads, ByStatus and ByAgent, and the oldest pending
// work thread is OldestPending.
func (st *Stats) Count(t *Thread) {
	if t.Mail {
		st.MailThreads++
		return
	}
	st.Threads++
	st.ByStatus[t.Status]++
	if st.ByAgent[t.AssignedTo] == nil {
		st.ByAgent[t.AssignedTo] = map[string]int{}
	}
	st.ByAgent[t.AssignedTo][t.Status]++
	if t.Status == StatusPending && (st.OldestPending == nil || t.ThreadID < st.OldestPending.ThreadID) {
		st.OldestPending = t
	}
}

// LeaseExpiry is a thread whose lease is held (not released), and when the
// lease runs out.
type LeaseExpiry struct {
	ThreadID  string
	ExpiresAt time.Time
}

// HistoryEntry is one event of a store's log with everything it carried:
// what a backend exports and another imports to copy a store with its
// history (inbox migrate).
type HistoryEntry struct {
	Event Event
	// Thread is the thread after the event (nil when the event is not a
	// thread's, or its line carried no state: the thread is unchanged).
	Thread   *Thread
	Lease    *Lease
	LastFrom map[string]int
	Origin   *Origin
	Message  *Message
	// NewThreadKey is the idempotency key of the send that created the
	// thread, on its first message, and NewThreadArgs what that send was
	// given (NewThreadArgs; empty when recorded before they were kept).
	NewThreadKey, NewThreadArgs string
	// Key is an idempotency key a change of the thread used.
	Key *IdempotencyUse
	// Task is the task's name, on the event that queued it.
	Task string
	// Team is the whole team, on a team's event.
	Team *Team
}

// IdempotencyUse is a call made with an idempotency key; Args is what
// it was given (IdemArgs; empty when recorded before they were kept).
type IdempotencyUse struct {
	Key, Command, MessageID string
	Seq                     int
	Args                    string
}
