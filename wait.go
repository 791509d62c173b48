package inbox

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// ReplyThread is what a wait-reply needs from the thread it waits on, as
// the engine read it when the wait began.
type ReplyThread interface {
	// MessageCount is the number of messages in the thread.
	MessageCount() int
	// MessageByID returns the thread's message id, or an ErrNotFound error.
	MessageByID(id string) (*Message, error)
	// ReadSeq is agent's read cursor on the thread: the seq of the last
	// message it has read, 0 when none.
	ReadSeq(agent string) (int, error)
	// RequestSeq is the seq of the first message of the thread carrying
	// request id requestID, 0 when none does.
	RequestSeq(requestID string) (int, error)
	// QuestionSeq is the seq of the thread's newest question (IsQuestion),
	// 0 when it has none.
	QuestionSeq() (int, error)
}

// IsQuestion reports whether m asks something a wait-reply waits to have
// answered: a question (reply --kind question) or a blocked update.
func IsQuestion(m *Message) bool {
	return m.Kind == KindQuestion || m.Status == StatusBlocked
}

// ReplyWait is a wait-reply's rules: where its cursor points and which
// message answers it. NewReplyWait checks the wait; Start resolves its
// cursor against the thread.
type ReplyWait struct {
	ThreadID string
	Cursor   ReplyCursor
	Filter   ReplyFilter
	// Kinds are the kinds that answer the wait.
	Kinds []string
	// ByCursor is set when the wait goes by the agent's read cursor: the
	// message that answers it moves the cursor (MarkRead) to it.
	ByCursor bool
	// AfterSeq, when 0 or more, says the wait is for messages after that
	// seq; else for messages after event AfterEvent.
	AfterSeq   int
	AfterEvent int64
	// RequestSeq is the request's own message, which the responses follow
	// (with Filter.RequestID).
	RequestSeq int
}

// NewReplyWait checks a wait-reply on thread tid: the thread id, the
// cursor and the filter (PrepareReplyWait).
func NewReplyWait(tid string, cur ReplyCursor, f ReplyFilter) (*ReplyWait, error) {
	if err := ValidateID("thread", tid); err != nil {
		return nil, err
	}
	kinds, byCursor, err := PrepareReplyWait(cur, f)
	if err != nil {
		return nil, err
	}
	return &ReplyWait{ThreadID: tid, Cursor: cur, Filter: f, Kinds: kinds, ByCursor: byCursor, AfterSeq: -1, AfterEvent: -1}, nil
}

// Start resolves the cursor into "messages after seq" or "after event":
// after the message given, after the event given, after the agent's read
// cursor, from the first message for a request's response, else (no
// cursor, no agent: seed 000's flag set) after the thread's last question
// or blocked update, so that the answer to the question waited on counts
// even when it landed before the wait, and after its newest message when
// it has no question. A request must be in the thread already.
func (w *ReplyWait) Start(t ReplyThread) error {
	cur, f := w.Cursor, w.Filter
	switch {
	case cur.AfterMessage != "":
		m, err := t.MessageByID(cur.AfterMessage)
		if err != nil {
			return err
		}
		w.AfterSeq, w.AfterEvent = m.Seq, m.EventID
	case cur.HasEvent:
		w.AfterEvent = cur.AfterEvent
	case w.ByCursor:
		seq, err := t.ReadSeq(cur.Agent)
		if err != nil {
			return err
		}
		w.AfterSeq = seq
	case f.RequestID != "":
		w.AfterSeq = 0
	default:
		seq, err := t.QuestionSeq()
		if err != nil {
			return err
		}
		if seq == 0 {
			seq = t.MessageCount()
		}
		w.AfterSeq = seq
	}
	if f.RequestID != "" {
		seq, err := t.RequestSeq(f.RequestID)
		if err != nil {
			return err
		}
		if seq == 0 {
			return NotFound("no message of thread %s carries request id %q: send the request first (send or reply with --request-id)", w.ThreadID, f.RequestID)
		}
		w.RequestSeq = seq
	}
	return nil
}

// KeepsLease reports whether the wait keeps thread t's lease l, as the
// waiting agent's own (WaitKeepsLease with the cursor's agent and token).
func (w *ReplyWait) KeepsLease(t *Thread, l *Lease, now time.Time) bool {
	return WaitKeepsLease(t, l, w.Cursor.Agent, w.Cursor.LeaseToken, now)
}

// After reports whether m is past the wait's cursor.
func (w *ReplyWait) After(m *Message) bool {
	if w.AfterSeq >= 0 {
		return m.Seq > w.AfterSeq
	}
	return m.EventID > w.AfterEvent
}

// Matches reports whether m answers the wait: past the cursor, of one of
// its kinds and types, and answering its request.
func (w *ReplyWait) Matches(m *Message) bool {
	f := w.Filter
	return w.After(m) && slices.Contains(w.Kinds, m.Kind) && (len(f.Types) == 0 || slices.Contains(f.Types, m.Type)) &&
		(f.RequestID == "" || m.RequestID == f.RequestID && m.Seq > w.RequestSeq)
}

// TerminalMessage is the message that moved a thread to its terminal
// status, from its messages oldest first: the newest carrying that status,
// else the newest of all (nil for none). A wait on an ended thread gets
// it: nothing more will come.
func TerminalMessage(msgs []*Message, status string) *Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Status == status {
			return msgs[i]
		}
	}
	if len(msgs) > 0 {
		return msgs[len(msgs)-1]
	}
	return nil
}

// Answer is the result of a wait that m answers. By cursor it first moves
// the agent's read cursor to m, with markRead (the engine's MarkRead).
func (w *ReplyWait) Answer(ctx context.Context, m *Message, markRead func(ctx context.Context, agent, tid string, seq int) (*Cursor, error)) (*WaitResult, error) {
	if w.ByCursor {
		if _, err := markRead(ctx, w.Cursor.Agent, w.ThreadID, m.Seq); err != nil {
			return nil, err
		}
	}
	return &WaitResult{Woke: true, NextEventID: m.EventID, Message: m}, nil
}

// Renewer renews a lease: a backend's Renew.
type Renewer func(ctx context.Context, agent, tid string, leaseSeconds int, token int64) (*Result, error)

// KeepLease keeps lease l, the waiting agent's (WaitKeepsLease), while a
// wait-reply blocks (SPEC §4 "A holder's own wait keeps its lease"): it
// renews l with renew, for its length (LeaseLength) and with its token,
// each time half of that length is left (LeaseRenewAt) by the clock now,
// until stop is called; stop returns once a renewal under way has ended.
// A renewal refused (the lease was taken or claimed again, the thread
// ended) ends the keeping, and the wait goes on without it; one that
// failed to reach the store is tried again a little later. Nothing
// outlives the process: a waiter that dies renews no more, and its lease
// runs out.
func KeepLease(ctx context.Context, l Lease, now func() time.Time, renew Renewer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		secs := LeaseLength(&l)
		retry := min(max(time.Duration(secs)*time.Second/10, 100*time.Millisecond), 5*time.Second)
		at := LeaseRenewAt(&l)
		for {
			t := time.NewTimer(max(at.Sub(now()), 0))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			r, err := renew(ctx, l.AgentID, l.ThreadID, secs, l.LeaseToken)
			switch {
			case ctx.Err() != nil:
				return
			case err == nil && r != nil && r.Lease != nil:
				l = *r.Lease
				at = LeaseRenewAt(&l)
			case errors.Is(err, ErrStorage):
				at = now().Add(retry)
			default:
				return
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
