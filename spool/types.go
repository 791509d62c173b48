package spool

import (
	"time"

	"github.com/inbox-dev/inbox"
)

// draft is a message being written, with the blobs it carries, which are
// linked into the store when the message commits.
type draft struct {
	inbox.Message
	blobs []*inbox.Blob
}

// discardBlobs removes the staged temp files of a message's blobs (the
// committed blobs are other links to them).
func (m *draft) discardBlobs() {
	if m == nil {
		return
	}
	for _, b := range m.blobs {
		discard(b)
	}
}

// leaseRecord is lease.json: the lease and the count of the file's
// writes, Rev, which the thread header records as the last committed one
// (lease_rev).
type leaseRecord struct {
	inbox.Lease
	Rev int64 `json:"rev,omitempty"`
}

// logEvent is one line of the event log: the event and, for a change of a
// thread, what redoes the change — the thread's header after it (State),
// the message it added as its file holds it, the thread-scoped
// idempotency record it wrote and the task it registered. The log is the
// commit point of durability (docs/ARCHITECTURE.md): replay after a power
// cut rebuilds every file a logged change had written from these.
//
// The message is the line's last member, so that a writer can encode it
// straight into the line and write the message's file from the same
// bytes (tx.event); lines written before this order have it before idem.
type logEvent struct {
	inbox.Event
	State   *header     `json:"state,omitempty"`
	Idem    *idemRecord `json:"idem,omitempty"`
	Task    string      `json:"task,omitempty"`
	Team    *teamRecord `json:"team,omitempty"`
	Message *msgFile    `json:"message,omitempty"`
}

// teamRecord is teams/<name>.json: the team as its newest change (the
// event EventID) left it.
type teamRecord struct {
	inbox.Team
	EventID int64 `json:"event_id"`
}

// logHead is a log line read without the message it carries: what
// scanners that do not redo changes (waits, follows, fsck's index of the
// log) need, without decoding bodies.
type logHead struct {
	inbox.Event
	State *header `json:"state,omitempty"`
}

// header is thread.json: the public thread plus bookkeeping.
type header struct {
	inbox.Thread
	// Lease is the committed lease (a copy of lease.json at LeaseRev).
	Lease    *inbox.Lease `json:"lease,omitempty"`
	LeaseRev int64        `json:"lease_rev"`
	// LastFrom maps each sender to the seq of its latest message, so that
	// "unread for A" is a lookup, not a scan.
	LastFrom map[string]int `json:"last_from,omitempty"`
	// LogPos is where the thread's last event ends in the log, and
	// LastEvent that event (without its state); a writer that finds the
	// event missing after a crash appends it again.
	LogPos    Pos          `json:"log_pos"`
	LastEvent *inbox.Event `json:"last_event,omitempty"`
	// Origin is the intake descriptor the thread came from, if any.
	Origin *inbox.Origin `json:"origin,omitempty"`
}

// Pos is a position in the event log: the segment (named by its first
// event id) and the byte offset just past an event's line.
type Pos struct {
	Segment int64 `json:"segment"`
	Offset  int64 `json:"offset"`
}

// view is the thread as readers see it at time now: the stored thread
// with LeaseExpired worked out.
func (h *header) view(now time.Time) *inbox.Thread {
	t := h.Thread
	l := h.Lease
	t.LeaseExpired = l != nil && l.AgentID != "" && !l.Released() && !inbox.IsTerminal(h.Status) && !l.Live(now)
	return &t
}

func (h *header) clone() *header {
	c := *h
	if h.Lease != nil {
		l := *h.Lease
		c.Lease = &l
	}
	if h.Origin != nil {
		o := *h.Origin
		c.Origin = &o
	}
	c.LastFrom = make(map[string]int, len(h.LastFrom)+1)
	for k, v := range h.LastFrom {
		c.LastFrom[k] = v
	}
	return &c
}
