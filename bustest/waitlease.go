package bustest

// wait-reply's rules that tie it to the thread it waits on (SPEC §4): a
// holder's own wait keeps its lease, and a wait with neither cursor nor
// agent (seed 000's flag set) waits after the thread's last question.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
)

// testWaitKeepsHolderLease: the lease holder waits three times its lease
// length in WaitReply and then finishes with its token; its wait renewed
// the lease, at most once per third of its length (counted in the event
// log). The same waits by another agent, by no agent, or by the holder
// with a token that is not the lease's renew nothing: those leases lapse.
func testWaitKeepsHolderLease(t *testing.T, b inbox.Bus) {
	ctx := t.Context()
	const secs = 2
	lease := secs * time.Second
	claimed := func(subject string) (string, int64) {
		tid := newThread(t, b, "w", subject).Thread.ThreadID
		l := ok(b.Claim(ctx, "w", tid, secs))(t).Lease
		ok(b.Update(ctx, "w", tid, inbox.StatusBlocked, l.LeaseToken, inbox.Content{Summary: "which one?"}))(t)
		return tid, l.LeaseToken
	}
	held, token := claimed("held while its holder waits")
	byOther, _ := claimed("waited on by another agent")
	byNobody, _ := claimed("waited on by no agent")
	byWrongToken, wrong := claimed("waited on with another token")
	start := ok(b.LastEventID(ctx))(t)
	waits := []struct {
		tid string
		cur inbox.ReplyCursor
	}{
		{held, inbox.ReplyCursor{Agent: "w", LeaseToken: token}},
		{byOther, inbox.ReplyCursor{Agent: "leader"}},
		{byNobody, inbox.ReplyCursor{}},
		{byWrongToken, inbox.ReplyCursor{Agent: "w", LeaseToken: wrong + 1}},
	}
	began := time.Now()
	var wg sync.WaitGroup
	for _, w := range waits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.WaitReply(context.Background(), w.tid, w.cur, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: 3 * lease})
			if err != nil {
				t.Errorf("wait on %s as %+v: %v", w.tid, w.cur, err)
			} else if r.Woke {
				t.Errorf("wait on %s as %+v woke with nothing to wake it: %+v", w.tid, w.cur, r.Message)
			}
		}()
	}
	wg.Wait()
	waited := time.Since(began)
	if waited < 3*lease {
		t.Fatalf("the waits returned after %v, before their %v timeout", waited, 3*lease)
	}
	if _, err := b.Done(ctx, "w", held, token, inbox.Content{Summary: "finished after the wait"}); err != nil {
		t.Errorf("the holder's done with its token after waiting %v on a %v lease: %v (its wait did not keep the lease)", waited, lease, err)
	}
	for _, tid := range []string{byOther, byNobody, byWrongToken} {
		_, err := b.Done(ctx, "w", tid, 0, inbox.Content{Summary: "too late"})
		wantErr(t, "done on a thread only another agent's, no agent's or another token's wait waited on", err, inbox.ErrLeaseExpired)
	}
	renews := map[string]int{}
	ok(0, b.Events(ctx, start, func(ev *inbox.Event) bool {
		if ev.EventType == inbox.EventLeaseRenewed {
			renews[ev.ThreadID]++
		}
		return true
	}))(t)
	if most := int(waited / (lease / 3)); renews[held] == 0 || renews[held] > most {
		t.Errorf("the holder's wait of %v renewed its %v lease %d times, want 1 to %d (at most one renew per third of the lease)",
			waited, lease, renews[held], most)
	}
	for _, tid := range []string{byOther, byNobody, byWrongToken} {
		if renews[tid] != 0 {
			t.Errorf("a wait that is not the holder's renewed the lease of %s %d times", tid, renews[tid])
		}
	}
}

// testWaitReplyNoAgent: seed 000's flag set, wait-reply --thread T with
// no cursor and no agent, waits after the thread's last question or
// blocked update: the answer that landed before the wait began is
// returned; a timeout's cursor finds the next answer; a thread with no
// question waits after its newest message; an ended thread answers at
// once with the message that ended it.
func testWaitReplyNoAgent(t *testing.T, b inbox.Bus) {
	ctx := t.Context()
	none := inbox.ReplyCursor{}
	tid := newThread(t, b, "w", "which database?").Thread.ThreadID
	ok(b.Claim(ctx, "w", tid, 60))(t)
	ok(b.Update(ctx, "w", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "Which database?"}))(t)
	a := ok(b.Reply(ctx, "leader", "", tid, inbox.KindAnswer, inbox.Content{Summary: "Postgres"}))(t)
	ok(b.Reply(ctx, "leader", "", tid, inbox.KindProgress, inbox.Content{Summary: "fyi: not urgent"}))(t)
	w := ok(b.WaitReply(ctx, tid, none, inbox.ReplyFilter{}, inbox.WaitOptions{}))(t)
	if !w.Woke || w.Message.MessageID != a.Message.MessageID {
		t.Fatalf("a wait with no cursor and no agent after the answer landed: %+v, want the answer %s", w, a.Message.MessageID)
	}
	if w.NextEventID != a.Message.EventID {
		t.Errorf("its next_event_id is %d, want the answer's event %d", w.NextEventID, a.Message.EventID)
	}
	// A question asked with reply --kind question counts as well: the
	// first answer is before it, and a wait times out with a cursor that
	// finds the answer written next.
	q := ok(b.Reply(ctx, "w", "", tid, inbox.KindQuestion, inbox.Content{Summary: "And which version?"}))(t)
	w = ok(b.WaitReply(ctx, tid, none, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: 200 * time.Millisecond}))(t)
	if w.Woke {
		t.Fatalf("a wait after the second question woke with %+v, an answer to the first", w.Message)
	}
	if w.NextEventID < q.Message.EventID {
		t.Errorf("the timeout's next_event_id %d is before the question's event %d", w.NextEventID, q.Message.EventID)
	}
	hint := w.NextEventID
	a2 := ok(b.Reply(ctx, "leader", "", tid, inbox.KindAnswer, inbox.Content{Summary: "16"}))(t)
	for _, cur := range []inbox.ReplyCursor{none, {AfterEvent: hint, HasEvent: true}} {
		w = ok(b.WaitReply(ctx, tid, cur, inbox.ReplyFilter{}, inbox.WaitOptions{}))(t)
		if !w.Woke || w.Message.MessageID != a2.Message.MessageID {
			t.Errorf("a wait %+v after the second answer: %+v, want %s", cur, w, a2.Message.MessageID)
		}
	}
	// A thread with no question: only what comes after its newest message.
	quiet := newThread(t, b, "w", "no question here").Thread.ThreadID
	ok(b.Reply(ctx, "leader", "", quiet, inbox.KindAnswer, inbox.Content{Summary: "unprompted"}))(t)
	if w := ok(b.WaitReply(ctx, quiet, none, inbox.ReplyFilter{}, inbox.WaitOptions{}))(t); w.Woke {
		t.Errorf("a wait on a thread with no question returned a message already there: %+v", w.Message)
	}
	// An ended thread answers at once with the message that ended it.
	d := ok(b.Done(ctx, "w", tid, 0, inbox.Content{Summary: "finished"}))(t)
	start := time.Now()
	w = ok(b.WaitReply(ctx, tid, none, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: 5 * time.Second}))(t)
	if !w.Woke || w.Message.MessageID != d.Message.MessageID || time.Since(start) > 2*time.Second {
		t.Errorf("a wait on a done thread: %+v after %v, want %s at once", w, time.Since(start), d.Message.MessageID)
	}
}
