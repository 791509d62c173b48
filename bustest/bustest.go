// Package bustest is the conformance suite for backends of inbox.Bus, in
// the manner of testing/fstest: a backend's own tests call Run with a
// function that opens a fresh, empty bus, and the suite checks through
// the interface alone the semantics SPEC §4–§8 promise — atomic claims
// and fencing tokens, lease expiry, idempotent retries, read cursors,
// collect-once mailboxes, wake-ups and timeouts of the blocking calls,
// event order, tasks, and seed 002's protocol (teams, delivery to several recipients,
// acknowledgments, request/response).
//
// A second backend proves itself by passing it unchanged.
package bustest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
)

// Run runs the suite. open returns a new, empty bus for each test; it
// should register its own cleanup with t.
func Run(t *testing.T, open func(t *testing.T) inbox.Bus) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b inbox.Bus)
	}{
		{"SendFetchClaimDone", testLifecycle},
		{"ClaimIsAtomic", testClaimIsAtomic},
		{"FencingTokens", testFencing},
		{"LeaseExpiry", testLeaseExpiry},
		{"Transitions", testTransitions},
		{"IdempotentRetries", testIdempotency},
		{"ReadCursors", testReadCursors},
		{"OneModelOfReading", testOneModelOfReading},
		{"Search", testSearch},
		{"MailIsNotWork", testMailIsNotWork},
		{"MailPeekAndSessionMarks", testMailPeek},
		{"CollectOnce", testCollectOnce},
		{"ReceiveWakesAndTimesOut", testReceive},
		{"WaitReply", testWaitReply},
		{"WaitReplyNoLostWakeup", testWaitReplyNoLostWakeup},
		{"WaitReplyNoAgent", testWaitReplyNoAgent},
		{"WaitKeepsHolderLease", testWaitKeepsHolderLease},
		{"Watch", testWatch},
		{"EventOrder", testEventOrder},
		{"Tasks", testTasks},
		{"TaskStartsOnce", testTaskStartsOnce},
		{"Errors", testErrors},
		{"AgentsAndPresence", testAgents},
		{"Fsck", testFsck},
		{"Teams", testTeams},
		{"MultiRecipientDelivery", testMultiRecipient},
		{"OfferedThreadOneWinner", testOfferedClaim},
		{"Acknowledgments", testAcks},
		{"RequestResponse", testRequestResponse},
		{"Attention", testAttention},
		{"WaitGraph", testWaitGraph},
		{"FollowPresence", testFollowPresence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, open(t))
		})
	}
}

// ok returns a function that fails the test on err and otherwise returns
// v: ok(b.Send(in))(t).
func ok[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// wantErr fails unless err wraps sentinel.
func wantErr(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: got error %v, want %v", what, err, sentinel)
		return
	}
	var e *inbox.Error
	if !errors.As(err, &e) || e.Code == "" {
		t.Errorf("%s: %v is not an *inbox.Error with a code", what, err)
	}
}

func newThread(t *testing.T, b inbox.Bus, to, subject string) *inbox.Result {
	t.Helper()
	return ok(b.Send(t.Context(), inbox.SendInput{From: "leader", To: to, Subject: subject,
		Content: inbox.Content{Body: "details of " + subject}}))(t)
}

func ids(ts []*inbox.Thread) []string {
	var out []string
	for _, th := range ts {
		out = append(out, th.ThreadID)
	}
	return out
}

func testLifecycle(t *testing.T, b inbox.Bus) {
	r := newThread(t, b, "w", "build it")
	tid := r.Thread.ThreadID
	if r.Thread.Status != inbox.StatusPending || r.Thread.AssignedTo != "w" || r.Message.Kind != inbox.KindTask {
		t.Fatalf("new thread: %+v %+v", r.Thread, r.Message)
	}
	got := ok(b.Fetch(t.Context(), "w", nil, 10, false))(t)
	if !slices.Equal(ids(got), []string{tid}) {
		t.Fatalf("fetch: got %v, want [%s]", ids(got), tid)
	}
	// fetch never grants ownership.
	if th := ok(b.Thread(t.Context(), tid))(t); th.Status != inbox.StatusPending {
		t.Errorf("fetch changed the thread's status to %s", th.Status)
	}
	c := ok(b.Claim(t.Context(), "w", tid, 60))(t)
	if c.Thread.Status != inbox.StatusClaimed || c.Lease == nil || c.Lease.LeaseToken != 1 || c.Lease.AgentID != "w" {
		t.Fatalf("claim: %+v %+v", c.Thread, c.Lease)
	}
	if got := ok(b.Fetch(t.Context(), "w", nil, 10, false))(t); len(got) != 0 {
		t.Errorf("a claimed thread is still offered by fetch: %v", ids(got))
	}
	ok(b.Update(t.Context(), "w", tid, inbox.StatusInProgress, 1, inbox.Content{Summary: "working"}))(t)
	ok(b.Update(t.Context(), "w", tid, inbox.StatusBlocked, 1, inbox.Content{Summary: "which database?"}))(t)
	ok(b.Reply(t.Context(), "leader", "", tid, inbox.KindAnswer, inbox.Content{Summary: "postgres"}))(t)
	d := ok(b.Done(t.Context(), "w", tid, 1, inbox.Content{Summary: "built"}))(t)
	if d.Thread.Status != inbox.StatusDone || d.Message.Status != inbox.StatusDone {
		t.Fatalf("done: %+v", d.Thread)
	}
	v := ok(b.Show(t.Context(), tid))(t)
	var kinds []string
	for _, m := range v.Messages {
		kinds = append(kinds, m.Kind)
	}
	if want := []string{"task", "progress", "question", "answer", "result"}; !slices.Equal(kinds, want) {
		t.Errorf("show: kinds %v, want %v", kinds, want)
	}
	if v.Lease == nil || !v.Lease.Released() {
		t.Errorf("done did not release the lease: %+v", v.Lease)
	}
	th, last := ok2(b.LastMessage(t.Context(), tid))(t)
	if th.Status != inbox.StatusDone || last.Summary != "built" {
		t.Errorf("last message: %+v %+v", th, last)
	}
}

func ok2[A, B any](a A, b B, err error) func(t *testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

func testClaimIsAtomic(t *testing.T, b inbox.Bus) {
	for round := range 5 {
		tid := newThread(t, b, "w", fmt.Sprint("race ", round)).Thread.ThreadID
		const n = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				agent := fmt.Sprint("w", i)
				_, err := b.Claim(t.Context(), agent, tid, 60)
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, agent)
					mu.Unlock()
				case !errors.Is(err, inbox.ErrLeaseConflict):
					t.Errorf("claim by %s: %v, want a lease conflict", agent, err)
				}
			}()
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d claims won (%v), want exactly 1", round, len(winners), winners)
		}
		v := ok(b.Show(t.Context(), tid))(t)
		if v.Thread.AssignedTo != winners[0] || v.Lease.AgentID != winners[0] {
			t.Errorf("the winner %s does not hold the thread: %+v", winners[0], v.Lease)
		}
	}
}

func testFencing(t *testing.T, b inbox.Bus) {
	tid := newThread(t, b, "w", "fenced").Thread.ThreadID
	c1 := ok(b.Claim(t.Context(), "w", tid, 60))(t)
	c2 := ok(b.Claim(t.Context(), "w", tid, 60))(t) // the holder may claim again
	if c2.Lease.LeaseToken <= c1.Lease.LeaseToken {
		t.Fatalf("re-claim token %d is not above %d", c2.Lease.LeaseToken, c1.Lease.LeaseToken)
	}
	_, err := b.Update(t.Context(), "w", tid, inbox.StatusInProgress, c1.Lease.LeaseToken, inbox.Content{Summary: "old"})
	wantErr(t, "update with a superseded token", err, inbox.ErrStaleToken)
	_, err = b.Done(t.Context(), "w", tid, c1.Lease.LeaseToken, inbox.Content{Summary: "old"})
	wantErr(t, "done with a superseded token", err, inbox.ErrStaleToken)
	_, err = b.Claim(t.Context(), "other", tid, 60)
	wantErr(t, "claim of a held thread", err, inbox.ErrLeaseConflict)
	_, err = b.Update(t.Context(), "other", tid, inbox.StatusInProgress, 0, inbox.Content{Summary: "not mine"})
	wantErr(t, "update by a non-holder", err, inbox.ErrLeaseConflict)
	ok(b.Renew(t.Context(), "w", tid, 120, c2.Lease.LeaseToken))(t)
	ok(b.Done(t.Context(), "w", tid, c2.Lease.LeaseToken, inbox.Content{Summary: "ok"}))(t)
}

func testLeaseExpiry(t *testing.T, b inbox.Bus) {
	tid := newThread(t, b, "w", "expiring").Thread.ThreadID
	old := ok(b.Claim(t.Context(), "w", tid, 1))(t)
	time.Sleep(1200 * time.Millisecond)
	// Expired for every command, daemon or not: fetch offers it.
	got := ok(b.Fetch(t.Context(), "w", nil, 10, false))(t)
	if len(got) != 1 || !got[0].LeaseExpired {
		t.Fatalf("fetch after expiry: %+v, want the thread with lease_expired", got)
	}
	_, err := b.Update(t.Context(), "w", tid, inbox.StatusInProgress, old.Lease.LeaseToken, inbox.Content{Summary: "late"})
	wantErr(t, "update after expiry", err, inbox.ErrLeaseExpired)
	// The same agent's new session claims it again: the old session's
	// token is fenced out although the name matches.
	c := ok(b.Claim(t.Context(), "w", tid, 60))(t)
	if c.Lease.LeaseToken <= old.Lease.LeaseToken {
		t.Fatalf("token after expiry %d is not above %d", c.Lease.LeaseToken, old.Lease.LeaseToken)
	}
	_, err = b.Done(t.Context(), "w", tid, old.Lease.LeaseToken, inbox.Content{Summary: "stale"})
	wantErr(t, "done with the expired session's token", err, inbox.ErrStaleToken)
	held := ok(b.HeldLeases(t.Context()))(t)
	if len(held) != 1 || held[0].ThreadID != tid {
		t.Errorf("held leases: %+v", held)
	}
	// An expired lease is released by ExpireLease (the daemon's job).
	tid2 := newThread(t, b, "w", "expiring 2").Thread.ThreadID
	first := ok(b.Claim(t.Context(), "w", tid2, 1))(t)
	if expired := ok(b.ExpireLease(t.Context(), tid2))(t); expired {
		t.Errorf("ExpireLease released a live lease")
	}
	time.Sleep(1200 * time.Millisecond)
	if expired := ok(b.ExpireLease(t.Context(), tid2))(t); !expired {
		t.Errorf("ExpireLease kept an expired lease")
	}
	if th := ok(b.Thread(t.Context(), tid2))(t); th.Status != inbox.StatusPending {
		t.Errorf("after expiry the thread is %s, want pending", th.Status)
	}
	// Another agent takes it; the first holder is out, token or not.
	c2 := ok(b.Claim(t.Context(), "w2", tid2, 60))(t)
	if c2.Lease.LeaseToken <= first.Lease.LeaseToken {
		t.Errorf("token after expiry %d is not above %d", c2.Lease.LeaseToken, first.Lease.LeaseToken)
	}
	_, err = b.Done(t.Context(), "w", tid2, first.Lease.LeaseToken, inbox.Content{Summary: "stale"})
	wantErr(t, "done by the expired holder", err, inbox.ErrLeaseConflict)
}

func testTransitions(t *testing.T, b inbox.Bus) {
	tid := newThread(t, b, "w", "strict").Thread.ThreadID
	_, err := b.Update(t.Context(), "w", tid, inbox.StatusInProgress, 0, inbox.Content{Summary: "unclaimed"})
	wantErr(t, "update of an unclaimed thread", err, inbox.ErrInvalidState)
	ok(b.Claim(t.Context(), "w", tid, 60))(t)
	_, err = b.Update(t.Context(), "w", tid, inbox.StatusBlocked, 0, inbox.Content{})
	wantErr(t, "blocked without saying what is missing", err, inbox.ErrInvalidInput)
	ok(b.Fail(t.Context(), "w", tid, 0, inbox.Content{Summary: "cannot"}))(t)
	_, err = b.Claim(t.Context(), "w", tid, 60)
	wantErr(t, "claim of a failed thread", err, inbox.ErrInvalidState)
	_, err = b.Reply(t.Context(), "leader", "", tid, inbox.KindAnswer, inbox.Content{Summary: "late"})
	wantErr(t, "reply to a failed thread", err, inbox.ErrInvalidState)
	tid2 := newThread(t, b, "w", "to cancel").Thread.ThreadID
	ok(b.Cancel(t.Context(), "leader", tid2, inbox.Content{Summary: "not needed"}))(t)
	_, err = b.Cancel(t.Context(), "leader", tid2, inbox.Content{Summary: "again"})
	wantErr(t, "cancel of a cancelled thread", err, inbox.ErrInvalidState)
}

func testIdempotency(t *testing.T, b inbox.Bus) {
	in := inbox.SendInput{From: "leader", To: "w", Subject: "once", Content: inbox.Content{IdempotencyKey: "k-send"}}
	a := ok(b.Send(t.Context(), in))(t)
	again := ok(b.Send(t.Context(), in))(t)
	if again.Thread.ThreadID != a.Thread.ThreadID || again.Message.MessageID != a.Message.MessageID || !again.Replayed {
		t.Fatalf("retried send: %+v, want the original %s (replayed)", again.Message, a.Message.MessageID)
	}
	tid := a.Thread.ThreadID
	r1 := ok(b.Reply(t.Context(), "leader", "", tid, inbox.KindProgress, inbox.Content{Summary: "note", IdempotencyKey: "k-reply"}))(t)
	r2 := ok(b.Reply(t.Context(), "leader", "", tid, inbox.KindProgress, inbox.Content{Summary: "note", IdempotencyKey: "k-reply"}))(t)
	if r1.Message.MessageID != r2.Message.MessageID {
		t.Errorf("retried reply made a second message")
	}
	ok(b.Claim(t.Context(), "w", tid, 60))(t)
	d1 := ok(b.Done(t.Context(), "w", tid, 0, inbox.Content{Summary: "done", IdempotencyKey: "k-done"}))(t)
	d2 := ok(b.Done(t.Context(), "w", tid, 0, inbox.Content{Summary: "done", IdempotencyKey: "k-done"}))(t)
	if d1.Message.MessageID != d2.Message.MessageID {
		t.Errorf("retried done made a second message")
	}
	if n := len(ok(b.Show(t.Context(), tid))(t).Messages); n != 3 {
		t.Errorf("thread has %d messages after retries, want 3", n)
	}
	_, err := b.Reply(t.Context(), "leader", "", tid, inbox.KindAnswer, inbox.Content{Summary: "x", IdempotencyKey: "k-done"})
	if err == nil {
		t.Errorf("a key reused for another command was accepted")
	}
}

func testReadCursors(t *testing.T, b inbox.Bus) {
	tid := newThread(t, b, "w", "questions").Thread.ThreadID
	ok(b.Claim(t.Context(), "w", tid, 60))(t)
	ok(b.Update(t.Context(), "w", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "which?"}))(t)
	ok(b.MarkRead(t.Context(), "w", tid, 0))(t)
	if got := ok(b.Fetch(t.Context(), "w", []string{inbox.StatusBlocked}, 10, true))(t); len(got) != 0 {
		t.Errorf("unread after marking everything read: %v", ids(got))
	}
	ok(b.Reply(t.Context(), "leader", "w", tid, inbox.KindAnswer, inbox.Content{Summary: "this one"}))(t)
	if got := ok(b.Fetch(t.Context(), "w", []string{inbox.StatusBlocked}, 10, true))(t); !slices.Equal(ids(got), []string{tid}) {
		t.Errorf("unread after an answer: %v, want [%s]", ids(got), tid)
	}
	c := ok(b.MarkRead(t.Context(), "w", tid, 0))(t)
	if c.LastReadSeq != 3 || c.AgentID != "w" {
		t.Errorf("cursor: %+v", c)
	}
	if got := ok(b.Fetch(t.Context(), "w", []string{inbox.StatusBlocked}, 10, true))(t); len(got) != 0 {
		t.Errorf("still unread after reading the answer: %v", ids(got))
	}
}

// testOneModelOfReading checks that the read cursor and the mailbox are
// one fact (SPEC §7): claim, wait-reply, mark-read, done and cancel read
// what is addressed to the agent in the thread, and collecting moves the
// cursor.
func testOneModelOfReading(t *testing.T, b inbox.Bus) {
	ctx := t.Context()
	depth := func(agent string) int {
		t.Helper()
		return len(ok(b.Mailbox(ctx, agent, ""))(t))
	}
	// The seed-000 loop leaves nothing of its thread in the worker's mailbox.
	tid := newThread(t, b, "w", "task").Thread.ThreadID
	if n := depth("w"); n != 1 {
		t.Fatalf("the task message in the mailbox: %d, want 1", n)
	}
	ok(b.Claim(ctx, "w", tid, 60))(t)
	if n := depth("w"); n != 0 {
		t.Errorf("after claim, the task message is still in the mailbox (%d)", n)
	}
	if got := ok(b.Fetch(ctx, "w", []string{inbox.StatusClaimed}, 10, true))(t); len(got) != 0 {
		t.Errorf("after claim, the thread is unread: %v", ids(got))
	}
	ok(b.Update(ctx, "w", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "which?"}))(t)
	ok(b.Reply(ctx, "leader", "", tid, inbox.KindAnswer, inbox.Content{Summary: "that"}))(t)
	if n := depth("w"); n != 1 {
		t.Fatalf("the answer in the mailbox: %d, want 1", n)
	}
	w := ok(b.WaitReply(ctx, tid, inbox.ReplyCursor{Agent: "w"}, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: time.Second}))(t)
	if !w.Woke {
		t.Fatal("wait-reply did not return the answer")
	}
	if n := depth("w"); n != 0 {
		t.Errorf("the answer wait-reply returned is still in the mailbox (%d)", n)
	}
	ok(b.Reply(ctx, "leader", "", tid, inbox.KindProgress, inbox.Content{Summary: "fyi"}))(t)
	ok(b.Done(ctx, "w", tid, 0, inbox.Content{Summary: "finished"}))(t)
	if n := depth("w"); n != 0 {
		t.Errorf("after done, %d message(s) of the thread are still in the mailbox", n)
	}
	// The leader did not read the thread: the question and the result
	// wait in its mailbox.
	if n := depth("leader"); n != 2 {
		t.Errorf("the leader's mailbox: %d, want the question and the result", n)
	}

	// Collecting moves the read cursor: the collected answer is not
	// returned again by wait-reply, nor unread in fetch.
	tid2 := newThread(t, b, "w2", "second").Thread.ThreadID
	ok(b.Claim(ctx, "w2", tid2, 60))(t)
	ok(b.Update(ctx, "w2", tid2, inbox.StatusBlocked, 0, inbox.Content{Summary: "how?"}))(t)
	a := ok(b.Reply(ctx, "leader", "", tid2, inbox.KindAnswer, inbox.Content{Summary: "so"}))(t)
	got := ok(b.Collect(ctx, "w2", "", false, 0))(t)
	if len(got) != 1 || got[0].MessageID != a.Message.MessageID {
		t.Fatalf("collect: %+v, want the answer", got)
	}
	w = ok(b.WaitReply(ctx, tid2, inbox.ReplyCursor{Agent: "w2"}, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: 100 * time.Millisecond}))(t)
	if w.Woke {
		t.Errorf("wait-reply returned the answer already collected: %+v", w.Message)
	}
	if got := ok(b.Fetch(ctx, "w2", []string{inbox.StatusBlocked}, 10, true))(t); len(got) != 0 {
		t.Errorf("collected, yet unread: %v", ids(got))
	}

	// Marking a thread read collects what it marks.
	tid3 := ok(b.Send(ctx, inbox.SendInput{From: "leader", To: "w3", Content: inbox.Content{Body: "a note"}}))(t).Thread.ThreadID
	ok(b.Reply(ctx, "other", "w3", tid3, inbox.KindProgress, inbox.Content{Summary: "more"}))(t)
	if n := depth("w3"); n != 2 {
		t.Fatalf("w3's mailbox: %d, want 2", n)
	}
	ok(b.MarkRead(ctx, "w3", tid3, 1))(t)
	if n := depth("w3"); n != 1 {
		t.Errorf("after marking #1 read, w3's mailbox: %d, want 1", n)
	}
	ok(b.MarkRead(ctx, "w3", tid3, 0))(t)
	if n := depth("w3"); n != 0 {
		t.Errorf("after marking all read, w3's mailbox: %d, want 0", n)
	}

	// Cancel by a leader reads what the thread addressed to it.
	tid4 := ok(b.Send(ctx, inbox.SendInput{From: "lead2", To: "w4", Subject: "work"}))(t).Thread.ThreadID
	ok(b.Claim(ctx, "w4", tid4, 60))(t)
	ok(b.Update(ctx, "w4", tid4, inbox.StatusBlocked, 0, inbox.Content{Summary: "stuck"}))(t)
	if n := depth("lead2"); n != 1 {
		t.Fatalf("lead2's mailbox: %d, want the blocked question", n)
	}
	ok(b.Cancel(ctx, "lead2", tid4, inbox.Content{Summary: "never mind"}))(t)
	if n := depth("lead2"); n != 0 {
		t.Errorf("after cancel, lead2's mailbox: %d, want 0", n)
	}
}

// testSearch checks SPEC §16: every word (case-insensitive, whole words),
// phrases, the filters, newest first, a snippet, and the subject of a
// thread's first message.
func testSearch(t *testing.T, b inbox.Bus) {
	ctx := t.Context()
	t1 := ok(b.Send(ctx, inbox.SendInput{From: "lead", To: "dev", Subject: "Database migration", Content: inbox.Content{Body: "Move the users table to Postgres before Friday."}}))(t)
	ok(b.Reply(ctx, "dev", "lead", t1.Thread.ThreadID, inbox.KindQuestion, inbox.Content{Summary: "Which postgres version?", PayloadJSON: `{"detail":"needs pgvector"}`}))(t)
	ok(b.Send(ctx, inbox.SendInput{From: "ops", To: "lead", Content: inbox.Content{Body: "postgresql is down"}}))(t)
	ids := func(hs []*inbox.SearchHit) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Message.Summary)
		}
		return out
	}
	hs := ok(b.Search(ctx, inbox.SearchFilter{Query: "POSTGRES"}))(t)
	if got := ids(hs); !slices.Equal(got, []string{"Which postgres version?", "Database migration"}) {
		t.Errorf("postgres (whole words, newest first): %q", got)
	}
	if h := hs[1]; h.ThreadID != t1.Thread.ThreadID || h.Subject != "Database migration" || !strings.Contains(h.Snippet, "Postgres") {
		t.Errorf("hit: %+v", h)
	}
	if hs := ok(b.Search(ctx, inbox.SearchFilter{Query: `database "users table"`}))(t); len(hs) != 1 {
		t.Errorf("a word of the subject and a phrase of the body: %d hits", len(hs))
	}
	if hs := ok(b.Search(ctx, inbox.SearchFilter{Query: `"table users"`}))(t); len(hs) != 0 {
		t.Errorf("a phrase in the wrong order matched: %q", ids(hs))
	}
	if hs := ok(b.Search(ctx, inbox.SearchFilter{Query: "pgvector"}))(t); len(hs) != 1 {
		t.Errorf("payload text: %d hits", len(hs))
	}
	if hs := ok(b.Search(ctx, inbox.SearchFilter{Query: "postgres", From: "lead"}))(t); len(hs) != 1 {
		t.Errorf("--from lead: %d hits", len(hs))
	}
	if hs := ok(b.Search(ctx, inbox.SearchFilter{Query: "postgres", To: "lead", Kind: inbox.KindQuestion}))(t); len(hs) != 1 {
		t.Errorf("--to lead --kind question: %d hits", len(hs))
	}
	if hs := ok(b.Search(ctx, inbox.SearchFilter{Query: "postgresql", ThreadID: t1.Thread.ThreadID}))(t); len(hs) != 0 {
		t.Errorf("--thread: %d hits", len(hs))
	}
	if hs := ok(b.Search(ctx, inbox.SearchFilter{Query: "postgres", Limit: 1}))(t); len(hs) != 1 {
		t.Errorf("--limit 1: %d hits", len(hs))
	}
	if hs := ok(b.Search(ctx, inbox.SearchFilter{Query: "postgres", Since: time.Now().Add(time.Hour)}))(t); len(hs) != 0 {
		t.Errorf("--since the future: %d hits", len(hs))
	}
	_, err := b.Search(ctx, inbox.SearchFilter{Query: `  "" `})
	wantErr(t, "an empty query", err, inbox.ErrInvalidInput)
}

func testMailIsNotWork(t *testing.T, b inbox.Bus) {
	ok(b.Send(t.Context(), inbox.SendInput{From: "a", To: "m", Content: inbox.Content{Body: "a note"}}))(t)
	if got := ok(b.Fetch(t.Context(), "m", nil, 10, false))(t); len(got) != 0 {
		t.Errorf("mail shows in fetch: %v", ids(got))
	}
	items := ok(b.Mailbox(t.Context(), "m", ""))(t)
	if len(items) != 1 || items[0].Message.Body != "a note" {
		t.Fatalf("mailbox: %+v", items)
	}
	// High priority first.
	ok(b.Send(t.Context(), inbox.SendInput{From: "boss", To: "m", Subject: "urgent", Priority: "high", Content: inbox.Content{Body: "now"}}))(t)
	got := ok(b.Collect(t.Context(), "m", "", false, 10))(t)
	if len(got) != 2 || got[0].FromAgent != "boss" {
		t.Fatalf("collect order: %+v", got)
	}
	if left := ok(b.Mailbox(t.Context(), "m", ""))(t); len(left) != 0 {
		t.Errorf("collected mail is still in the mailbox: %d", len(left))
	}
}

func testCollectOnce(t *testing.T, b inbox.Bus) {
	const n = 20
	for i := range n {
		ok(b.Send(t.Context(), inbox.SendInput{From: "p", To: "c", Content: inbox.Content{Body: fmt.Sprint("m", i)}}))(t)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := b.Collect(t.Context(), "c", "", false, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				seen[got[0].MessageID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("collected %d distinct messages, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("message %s collected %d times", id, c)
		}
	}
}

func testReceive(t *testing.T, b inbox.Bus) {
	start := time.Now()
	m, err := b.Receive(context.Background(), "r", "", false, inbox.WaitOptions{Timeout: 300 * time.Millisecond})
	if err != nil || m != nil {
		t.Fatalf("receive on an empty mailbox: %v %v", m, err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("receive returned after %v, before its timeout", d)
	}
	done := make(chan *inbox.Message, 1)
	go func() {
		m, err := b.Receive(context.Background(), "r", "", false, inbox.WaitOptions{Timeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- m
	}()
	time.Sleep(100 * time.Millisecond)
	sent := ok(b.Send(t.Context(), inbox.SendInput{From: "s", To: "r", Content: inbox.Content{Body: "wake"}}))(t)
	select {
	case m := <-done:
		if m == nil || m.MessageID != sent.Message.MessageID {
			t.Errorf("receive woke with %+v, want %s", m, sent.Message.MessageID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("receive did not wake for a message sent while it waited")
	}
	// Cancellation ends a wait at once.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	start = time.Now()
	b.Receive(ctx, "r", "", false, inbox.WaitOptions{Timeout: 10 * time.Second})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a cancelled receive returned after %v", d)
	}
}

func testWaitReply(t *testing.T, b inbox.Bus) {
	tid := newThread(t, b, "w", "ask").Thread.ThreadID
	ok(b.Claim(t.Context(), "w", tid, 60))(t)
	q := ok(b.Update(t.Context(), "w", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "which?"}))(t)
	// An answer that landed before the wait began is not missed when the
	// wait is after the agent's read cursor.
	a := ok(b.Reply(t.Context(), "leader", "", tid, inbox.KindAnswer, inbox.Content{Summary: "that"}))(t)
	w := ok(b.WaitReply(context.Background(), tid, inbox.ReplyCursor{Agent: "w"}, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: time.Second}))(t)
	if !w.Woke || w.Message.MessageID != a.Message.MessageID {
		t.Fatalf("wait-reply after the cursor: %+v, want %s", w, a.Message.MessageID)
	}
	// ... and not returned twice: the cursor moved.
	w = ok(b.WaitReply(context.Background(), tid, inbox.ReplyCursor{Agent: "w"}, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: 200 * time.Millisecond}))(t)
	if w.Woke {
		t.Errorf("the same answer was returned twice: %+v", w.Message)
	}
	// After an event cursor, a timeout says where to resume.
	w = ok(b.WaitReply(context.Background(), tid, inbox.ReplyCursor{AfterEvent: a.Message.EventID, HasEvent: true}, inbox.ReplyFilter{},
		inbox.WaitOptions{Timeout: 200 * time.Millisecond}))(t)
	if w.Woke || w.NextEventID < a.Message.EventID {
		t.Errorf("timed-out wait: %+v", w)
	}
	// Kinds filter: a progress note does not wake a wait for answers.
	ok(b.Reply(t.Context(), "leader", "", tid, inbox.KindProgress, inbox.Content{Summary: "fyi"}))(t)
	w = ok(b.WaitReply(context.Background(), tid, inbox.ReplyCursor{AfterMessage: q.Message.MessageID}, inbox.ReplyFilter{Kinds: []string{inbox.KindAnswer}}, inbox.WaitOptions{Timeout: time.Second}))(t)
	if !w.Woke || w.Message.MessageID != a.Message.MessageID {
		t.Errorf("wait after the question: %+v", w)
	}
	// A terminal thread answers at once.
	ok(b.Done(t.Context(), "w", tid, 0, inbox.Content{Summary: "finished"}))(t)
	start := time.Now()
	w = ok(b.WaitReply(context.Background(), tid, inbox.ReplyCursor{Agent: "observer"}, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: 5 * time.Second}))(t)
	if !w.Woke || time.Since(start) > 2*time.Second {
		t.Errorf("wait-reply on a done thread: %+v after %v", w, time.Since(start))
	}
}

func testWaitReplyNoLostWakeup(t *testing.T, b inbox.Bus) {
	for i := range 10 {
		tid := newThread(t, b, "w", fmt.Sprint("wake ", i)).Thread.ThreadID
		cur := ok(b.LastEventID(t.Context()))(t)
		got := make(chan *inbox.WaitResult, 1)
		go func() {
			w, err := b.WaitReply(context.Background(), tid, inbox.ReplyCursor{AfterEvent: cur, HasEvent: true}, inbox.ReplyFilter{},
				inbox.WaitOptions{Timeout: 5 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		if i%2 == 1 {
			time.Sleep(time.Duration(i) * time.Millisecond)
		}
		a := ok(b.Reply(t.Context(), "leader", "w", tid, inbox.KindAnswer, inbox.Content{Summary: "now"}))(t)
		select {
		case w := <-got:
			if w == nil || !w.Woke || w.Message.MessageID != a.Message.MessageID {
				t.Fatalf("round %d: %+v", i, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the wait missed an answer", i)
		}
	}
}

func testWatch(t *testing.T, b inbox.Bus) {
	// The watch starts after an event id read first, so the thread
	// created below wakes it whenever the watch gets to run.
	after := ok(b.LastEventID(t.Context()))(t)
	done := make(chan *inbox.WaitResult, 1)
	go func() {
		w, err := b.Watch(context.Background(), "watcher", nil, &after, inbox.WaitOptions{Timeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- w
	}()
	tid := newThread(t, b, "watcher", "for you").Thread.ThreadID
	select {
	case w := <-done:
		if w == nil || !w.Woke || w.Thread == nil || w.Thread.ThreadID != tid {
			t.Errorf("watch: %+v, want thread %s", w, tid)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not wake for a new thread")
	}
	w := ok(b.Watch(context.Background(), "nobody", nil, nil, inbox.WaitOptions{Timeout: 200 * time.Millisecond}))(t)
	if w.Woke {
		t.Errorf("watch woke for another agent's thread: %+v", w)
	}
}

func testEventOrder(t *testing.T, b inbox.Bus) {
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				newThread(t, b, "w", fmt.Sprint("t", i, j))
			}
		}()
	}
	wg.Wait()
	var last int64
	n := 0
	if err := b.Events(t.Context(), 0, func(ev *inbox.Event) bool {
		if ev.EventID <= last {
			t.Errorf("event %d after %d", ev.EventID, last)
		}
		last = ev.EventID
		n++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != 20 {
		t.Errorf("%d events for 20 sends", n)
	}
	if id := ok(b.LastEventID(t.Context()))(t); id != last {
		t.Errorf("last event id %d, the log ends at %d", id, last)
	}
	// Follow delivers what comes next.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan int64, 1)
	go func() {
		b.Follow(ctx, last, "", inbox.WaitOptions{}, func(ev *inbox.Event) bool {
			got <- ev.EventID
			return false
		})
	}()
	time.Sleep(100 * time.Millisecond)
	newThread(t, b, "w", "followed")
	select {
	case id := <-got:
		if id != last+1 {
			t.Errorf("follow delivered event %d, want %d", id, last+1)
		}
	case <-ctx.Done():
		t.Fatal("follow delivered nothing")
	}
}

func testTasks(t *testing.T, b inbox.Bus) {
	task := ok(b.Push(t.Context(), inbox.TaskSpec{Name: "t1", Parent: "boss", Owner: "boss"}, "do the thing"))(t)
	if task.State() != "queued" || task.Prompt != "do the thing" {
		t.Fatalf("pushed task: %+v", task)
	}
	if _, err := b.Push(t.Context(), inbox.TaskSpec{Name: "t1", Parent: "boss", Owner: "boss"}, "again"); err == nil {
		t.Errorf("a second task named t1 was accepted")
	}
	ok(b.Push(t.Context(), inbox.TaskSpec{Name: "t2", Parent: "boss", Owner: "other"}, "other's"))(t)
	mine := ok(b.Tasks(t.Context(), inbox.TaskFilter{Owner: "boss"}))(t)
	if len(mine) != 1 || mine[0].Name != "t1" {
		t.Fatalf("boss's queue: %+v", mine)
	}
	byThread := ok(b.TaskByThread(t.Context(), task.ThreadID))(t)
	if byThread.Name != "t1" {
		t.Errorf("task by thread: %+v", byThread)
	}
	ok(b.Claim(t.Context(), "t1", task.ThreadID, 60))(t)
	if err := b.SetTaskRunner(t.Context(), "t1", &inbox.TaskRunner{RunnerPID: 42, PGID: 43, StartedAt: inbox.FormatTime(time.Now())}); err != nil {
		t.Fatal(err)
	}
	running := ok(b.TaskByName(t.Context(), "t1"))(t)
	if running.State() != "running" || running.Runner == nil || running.Runner.PGID != 43 {
		t.Errorf("running task: %+v", running)
	}
	ok(b.Done(t.Context(), "t1", task.ThreadID, 0, inbox.Content{Summary: "result", Body: "the output"}))(t)
	if err := b.SetTaskRunner(t.Context(), "t1", nil); err != nil {
		t.Fatal(err)
	}
	if st := ok(b.TaskByName(t.Context(), "t1"))(t).State(); st != "finished" {
		t.Errorf("task after done: %s", st)
	}
	// The result reaches the parent's mailbox, the prompt not the task's.
	mail := ok(b.Collect(t.Context(), "boss", "t1", false, 10))(t)
	if len(mail) != 1 || mail[0].Body != "the output" {
		t.Errorf("parent's mail: %+v", mail)
	}
	if m := ok(b.Mailbox(t.Context(), "t1", ""))(t); len(m) != 0 {
		t.Errorf("the task's prompt is in its own mailbox: %+v", m)
	}
	t2 := ok(b.TaskByName(t.Context(), "t2"))(t)
	ok(b.CancelTask(t.Context(), "other", t2, inbox.Content{Summary: "not needed"}))(t)
	if st := ok(b.TaskByName(t.Context(), "t2"))(t).State(); st != "finished" {
		t.Errorf("cancelled task: %s", st)
	}
	_, err := b.TaskByName(t.Context(), "nope")
	wantErr(t, "unknown task", err, inbox.ErrNotFound)
}

// testTaskStartsOnce: of 8 starts of a task at once, all as the task's
// own name, exactly one wins (a second claim by the same name would
// count as its holder claiming again); a task that started is never
// started again, also once its lease lapsed and the thread went back to
// pending (its runner died): it stays running, for Reap to fail.
func testTaskStartsOnce(t *testing.T, b inbox.Bus) {
	task := ok(b.Push(t.Context(), inbox.TaskSpec{Name: "once", Parent: "boss", Owner: "boss"}, "run me once"))(t)
	const starters = 8
	errs := make([]error, starters)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.StartTask(t.Context(), task, 1)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			wantErr(t, "a start that lost", err, inbox.ErrInvalidState)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent starts won, want exactly 1", won, starters)
	}
	running := ok(b.TaskByName(t.Context(), "once"))(t)
	if running.State() != "running" || running.LeaseToken != 1 {
		t.Fatalf("started task: %+v, want running with lease token 1", running)
	}
	// Its prompt was read by the start: not in its own mailbox.
	if m := ok(b.Mailbox(t.Context(), "once", ""))(t); len(m) != 0 {
		t.Errorf("the task's prompt is in its own mailbox: %+v", m)
	}
	_, err := b.StartTask(t.Context(), running, 60)
	wantErr(t, "a start of a running task", err, inbox.ErrInvalidState)
	// The runner is gone: its 1 s lease lapses and is released.
	deadline := time.Now().Add(10 * time.Second)
	for !ok(b.ExpireLease(t.Context(), task.ThreadID))(t) {
		if time.Now().After(deadline) {
			t.Fatal("the task's 1 s lease did not expire within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if th := ok(b.Thread(t.Context(), task.ThreadID))(t); th.Status != inbox.StatusPending {
		t.Fatalf("after expiry the task's thread is %s, want pending", th.Status)
	}
	lapsed := ok(b.TaskByName(t.Context(), "once"))(t)
	if lapsed.State() != "running" {
		t.Errorf("a started task whose lease lapsed is %s, want running (never queued again)", lapsed.State())
	}
	_, err = b.StartTask(t.Context(), lapsed, 60)
	wantErr(t, "a start of a task whose lease lapsed", err, inbox.ErrInvalidState)
	// A cancelled task never starts.
	other := ok(b.Push(t.Context(), inbox.TaskSpec{Name: "never", Parent: "boss", Owner: "boss"}, "not needed"))(t)
	ok(b.CancelTask(t.Context(), "boss", other, inbox.Content{Summary: "not needed"}))(t)
	_, err = b.StartTask(t.Context(), other, 60)
	wantErr(t, "a start of a cancelled task", err, inbox.ErrInvalidState)
}

func testErrors(t *testing.T, b inbox.Bus) {
	_, err := b.Send(t.Context(), inbox.SendInput{From: "leader", To: "../etc", Subject: "x"})
	wantErr(t, "a path as agent name", err, inbox.ErrInvalidInput)
	var e *inbox.Error
	if errors.As(err, &e) && e.Field != "to" {
		t.Errorf("bad recipient: field %q, want to", e.Field)
	}
	_, err = b.Claim(t.Context(), "w", "thr_doesnotexist", 60)
	wantErr(t, "claim of an unknown thread", err, inbox.ErrNotFound)
	_, err = b.Show(t.Context(), "thr_doesnotexist")
	wantErr(t, "show of an unknown thread", err, inbox.ErrNotFound)
	_, err = b.Fetch(t.Context(), "w", []string{"sleeping"}, 10, false)
	wantErr(t, "an unknown status", err, inbox.ErrInvalidInput)
	_, err = b.Send(t.Context(), inbox.SendInput{From: "leader", To: "w", Subject: "x", Content: inbox.Content{PayloadJSON: "{nope"}})
	wantErr(t, "bad payload JSON", err, inbox.ErrInvalidInput)
	if errors.As(err, &e) && e.Field != "payload_json" {
		t.Errorf("bad payload: field %q, want payload_json", e.Field)
	}
	tid := newThread(t, b, "w", "x").Thread.ThreadID
	_, err = b.Claim(t.Context(), "w", tid, 0-1)
	wantErr(t, "a negative lease", err, inbox.ErrInvalidInput)
}

func testAgents(t *testing.T, b inbox.Bus) {
	newThread(t, b, "worker", "job")
	got := ok(b.Agents(t.Context()))(t)
	byName := map[string]*inbox.AgentInfo{}
	for _, a := range got {
		byName[a.Agent] = a
	}
	if a := byName["worker"]; a == nil || a.LastActivity != nil || a.LastSeen == "" || a.MailboxDepth != 1 {
		t.Errorf("a recipient that never acted: %+v", a)
	}
	if a := byName["leader"]; a == nil || a.LastActivity == nil {
		t.Errorf("the sender: %+v", a)
	}
	release := b.Waiting(t.Context(), "listener")
	if a := agentNamed(t, b, "listener"); a == nil || a.State != inbox.StateWaiting {
		t.Errorf("a waiting agent: %+v", a)
	}
	release()
	if a := agentNamed(t, b, "listener"); a != nil && a.State == inbox.StateWaiting {
		t.Errorf("still waiting after release: %+v", a)
	}
	if w := b.UnknownAgentWarnings(t.Context(), "to", "workr"); len(w) == 0 {
		t.Errorf("no warning for a misspelled agent")
	}
	if w := b.UnknownAgentWarnings(t.Context(), "to", "leader"); len(w) != 0 {
		t.Errorf("a warning for a known agent: %v", w)
	}
}

func agentNamed(t *testing.T, b inbox.Bus, name string) *inbox.AgentInfo {
	for _, a := range ok(b.Agents(t.Context()))(t) {
		if a.Agent == name {
			return a
		}
	}
	return nil
}

func testFsck(t *testing.T, b inbox.Bus) {
	tid := newThread(t, b, "w", "checked").Thread.ThreadID
	ok(b.Claim(t.Context(), "w", tid, 60))(t)
	ok(b.Done(t.Context(), "w", tid, 0, inbox.Content{Summary: "ok"}))(t)
	ok(b.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Content: inbox.Content{Body: "mail"}}))(t)
	r := ok(b.Fsck(t.Context(), false))(t)
	if !r.Clean() {
		t.Errorf("fsck after ordinary work: %+v", r.Findings)
	}
	if n := ok(b.Reindex(t.Context()))(t); n < 2 {
		t.Errorf("reindex saw %d threads, want 2", n)
	}
	st := ok(b.Stats(t.Context()))(t)
	if st.Threads != 1 || st.MailThreads != 1 {
		t.Errorf("stats: %d threads and %d of mail, want 1 and 1 (mail is not work)", st.Threads, st.MailThreads)
	}
}

func testTeams(t *testing.T, b inbox.Bus) {
	tm := ok(b.CreateTeam(t.Context(), "lead", "devs", []string{"a", "b", "a"}))(t)
	if !slices.Equal(tm.Members, []string{"a", "b"}) || tm.Name != "devs" || tm.CreatedBy != "lead" {
		t.Fatalf("created %+v", tm)
	}
	_, err := b.CreateTeam(t.Context(), "lead", "devs", []string{"c"})
	wantErr(t, "create an existing team", err, inbox.ErrConflict)
	tm = ok(b.AddMembers(t.Context(), "lead", "devs", []string{"b", "c"}))(t)
	if !slices.Equal(tm.Members, []string{"a", "b", "c"}) {
		t.Errorf("after add: %v", tm.Members)
	}
	tm = ok(b.RemoveMembers(t.Context(), "lead", "devs", []string{"a"}))(t)
	if !slices.Equal(tm.Members, []string{"b", "c"}) {
		t.Errorf("after remove: %v", tm.Members)
	}
	_, err = b.RemoveMembers(t.Context(), "lead", "devs", []string{"a"})
	wantErr(t, "remove a non-member", err, inbox.ErrNotFound)
	_, err = b.Team(t.Context(), "nope")
	wantErr(t, "an unknown team", err, inbox.ErrNotFound)
	_, err = b.AddMembers(t.Context(), "lead", "nope", []string{"x"})
	wantErr(t, "add to an unknown team", err, inbox.ErrNotFound)
	_, err = b.CreateTeam(t.Context(), "lead", "bad/name", nil)
	wantErr(t, "a bad team name", err, inbox.ErrInvalidInput)
	teams := ok(b.Teams(t.Context()))(t)
	if len(teams) != 1 || teams[0].Name != "devs" {
		t.Errorf("teams: %+v", teams)
	}
	// Each change is an event.
	var types []string
	ok(0, b.Events(t.Context(), 0, func(ev *inbox.Event) bool { types = append(types, ev.EventType); return true }))(t)
	want := []string{inbox.EventTeamCreated, inbox.EventTeamMembersAdded, inbox.EventTeamMembersRemoved}
	if !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
	// Addressing a team with no member but the sender, or none at all.
	ok(b.CreateTeam(t.Context(), "lead", "solo", []string{"lead"}))(t)
	_, err = b.Send(t.Context(), inbox.SendInput{From: "lead", To: "@solo", Subject: "x"})
	wantErr(t, "send to a team of the sender alone", err, inbox.ErrInvalidInput)
	_, err = b.Send(t.Context(), inbox.SendInput{From: "lead", To: "@nope", Subject: "x"})
	wantErr(t, "send to an unknown team", err, inbox.ErrNotFound)
}

func testMultiRecipient(t *testing.T, b inbox.Bus) {
	ok(b.CreateTeam(t.Context(), "lead", "devs", []string{"lead", "a", "b", "c"}))(t)
	r := ok(b.Send(t.Context(), inbox.SendInput{From: "lead", To: "@devs", Kind: inbox.KindProgress, Content: inbox.Content{Body: "standup", Type: inbox.TypeTeamBroadcast}}))(t)
	if r.Message.ToAgent != "@devs" || !slices.Equal(r.Message.Recipients, []string{"a", "b", "c"}) || r.Message.Type != inbox.TypeTeamBroadcast {
		t.Fatalf("message %+v", r.Message)
	}
	r2 := ok(b.Send(t.Context(), inbox.SendInput{From: "lead", To: "a,c,a", Kind: inbox.KindProgress, Content: inbox.Content{Body: "pair"}}))(t)
	if r2.Message.ToAgent != "a,c,a" || !slices.Equal(r2.Message.Recipients, []string{"a", "c"}) {
		t.Fatalf("message %+v", r2.Message)
	}
	for agent, want := range map[string][]string{"a": {r.Message.MessageID, r2.Message.MessageID}, "b": {r.Message.MessageID},
		"c": {r.Message.MessageID, r2.Message.MessageID}, "lead": nil} {
		var got []string
		for _, m := range ok(b.Collect(t.Context(), agent, "", false, 0))(t) {
			got = append(got, m.MessageID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s collected %v, want %v", agent, got, want)
		}
		if again := ok(b.Collect(t.Context(), agent, "", false, 0))(t); len(again) != 0 {
			t.Errorf("%s collected again: %d", agent, len(again))
		}
	}
	// Stored once: the thread has one message.
	v := ok(b.Show(t.Context(), r.Message.ThreadID))(t)
	if len(v.Messages) != 1 {
		t.Errorf("the broadcast's thread holds %d messages", len(v.Messages))
	}
}

func testOfferedClaim(t *testing.T, b inbox.Bus) {
	ok(b.CreateTeam(t.Context(), "lead", "devs", []string{"a", "b", "c", "d"}))(t)
	r := ok(b.Send(t.Context(), inbox.SendInput{From: "lead", To: "@devs", Subject: "work for one"}))(t)
	tid := r.Thread.ThreadID
	if r.Thread.AssignedTo != "" || len(r.Thread.Recipients) != 4 {
		t.Fatalf("thread %+v", r.Thread)
	}
	for _, a := range []string{"a", "b", "c", "d"} {
		th := ok(b.Fetch(t.Context(), a, nil, 10, false))(t)
		if len(th) != 1 || th[0].ThreadID != tid {
			t.Fatalf("fetch of %s: %+v", a, th)
		}
	}
	var wins, conflicts int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, a := range []string{"a", "b", "c", "d"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.Claim(t.Context(), a, tid, 60)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, inbox.ErrLeaseConflict):
				conflicts++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || conflicts != 3 {
		t.Fatalf("%d winners, %d conflicts", wins, conflicts)
	}
	th := ok(b.Thread(t.Context(), tid))(t)
	for _, a := range []string{"a", "b", "c", "d"} {
		n := len(ok(b.Fetch(t.Context(), a, nil, 10, false))(t))
		if n != 0 {
			t.Errorf("after %s claimed it, %s's fetch still lists it", th.AssignedTo, a)
		}
	}
}

func testAcks(t *testing.T, b inbox.Bus) {
	r := ok(b.Send(t.Context(), inbox.SendInput{From: "lead", To: "a,b", Subject: "ack this", Content: inbox.Content{AckRequired: true}}))(t)
	m := r.Message
	if m.AckID == "" {
		t.Fatal("no ack_id on a message that asks for acknowledgment")
	}
	for _, a := range []string{"a", "b"} {
		owed := ok(b.Unacknowledged(t.Context(), a))(t)
		if len(owed) != 1 || owed[0].MessageID != m.MessageID {
			t.Errorf("%s owes %+v", a, owed)
		}
	}
	ack := ok(b.Ack(t.Context(), "a", m.MessageID, "", inbox.Content{}))(t)
	if ack.Message.Type != inbox.TypeAcknowledgment || ack.Message.ToAgent != "lead" || ack.Message.ThreadID != m.ThreadID {
		t.Errorf("acknowledgment %+v", ack.Message)
	}
	if owed := ok(b.Unacknowledged(t.Context(), "a"))(t); len(owed) != 0 {
		t.Errorf("a still owes %d", len(owed))
	}
	if owed := ok(b.Unacknowledged(t.Context(), "b"))(t); len(owed) != 1 {
		t.Errorf("b owes %d, want 1", len(owed))
	}
	again := ok(b.Ack(t.Context(), "a", m.MessageID, m.ThreadID, inbox.Content{}))(t)
	if !again.Replayed || again.Message.MessageID != ack.Message.MessageID {
		t.Errorf("second acknowledgment: %+v", again)
	}
	_, err := b.Ack(t.Context(), "c", m.MessageID, m.ThreadID, inbox.Content{})
	wantErr(t, "acknowledgment by a non-recipient", err, inbox.ErrInvalidState)
	_, err = b.Ack(t.Context(), "a", "msg_nope", "", inbox.Content{})
	wantErr(t, "acknowledgment of an unknown message", err, inbox.ErrNotFound)
}

func testRequestResponse(t *testing.T, b inbox.Bus) {
	r := ok(b.Send(t.Context(), inbox.SendInput{From: "lead", To: "w", Subject: "status?", Content: inbox.Content{Type: inbox.TypeTaskStatusRequest, RequestID: "req-1"}}))(t)
	tid := r.Thread.ThreadID
	if r.Message.RequestID != "req-1" {
		t.Fatalf("request %+v", r.Message)
	}
	gen := ok(b.Send(t.Context(), inbox.SendInput{From: "lead", To: "w", Subject: "again?", Content: inbox.Content{Request: true}}))(t)
	if gen.Message.RequestID == "" {
		t.Error("Request gave no request id")
	}
	got := make(chan *inbox.WaitResult, 1)
	go func() {
		w, err := b.WaitReply(context.Background(), tid, inbox.ReplyCursor{}, inbox.ReplyFilter{RequestID: "req-1"}, inbox.WaitOptions{Timeout: 5 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(50 * time.Millisecond)
	// An answer that is not the response does not wake it.
	ok(b.Reply(t.Context(), "w", "", tid, inbox.KindAnswer, inbox.Content{Summary: "unrelated"}))(t)
	resp := ok(b.Reply(t.Context(), "w", "", tid, "", inbox.Content{Type: inbox.TypeTaskStatusResponse, RequestID: "req-1", PayloadJSON: `{"progress":60}`}))(t)
	select {
	case w := <-got:
		if w == nil || !w.Woke || w.Message.MessageID != resp.Message.MessageID {
			t.Fatalf("wait for the response: %+v", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the response did not wake the wait")
	}
	// Found at once when it came first; --types alone.
	w := ok(b.WaitReply(context.Background(), tid, inbox.ReplyCursor{}, inbox.ReplyFilter{RequestID: "req-1"}, inbox.WaitOptions{}))(t)
	if !w.Woke || w.Message.MessageID != resp.Message.MessageID {
		t.Errorf("the response that came first: %+v", w)
	}
	w = ok(b.WaitReply(context.Background(), tid, inbox.ReplyCursor{HasEvent: true}, inbox.ReplyFilter{Types: []string{inbox.TypeTaskStatusResponse}}, inbox.WaitOptions{}))(t)
	if !w.Woke || w.Message.MessageID != resp.Message.MessageID {
		t.Errorf("wait by type: %+v", w)
	}
	_, err := b.WaitReply(context.Background(), tid, inbox.ReplyCursor{}, inbox.ReplyFilter{RequestID: "req-none"}, inbox.WaitOptions{})
	wantErr(t, "an unknown request id", err, inbox.ErrNotFound)
}

func testMailPeek(t *testing.T, b inbox.Bus) {
	if n, items := ok2(b.MailPeek(t.Context(), "p", 3))(t); n != 0 || len(items) != 0 {
		t.Fatalf("peek of an empty mailbox: %d, %d items", n, len(items))
	}
	for i := range 5 {
		ok(b.Send(t.Context(), inbox.SendInput{From: "s", To: "p", Content: inbox.Content{Body: fmt.Sprint("m", i)}}))(t)
	}
	n, items := ok2(b.MailPeek(t.Context(), "p", 3))(t)
	if n != 5 || len(items) != 3 {
		t.Fatalf("peek: %d waiting, %d items; want 5 and 3", n, len(items))
	}
	for i, it := range items {
		if want := fmt.Sprint("m", 4-i); it.Message.Body != want {
			t.Errorf("peek item %d: %q, want %q (newest first)", i, it.Message.Body, want)
		}
	}
	if left := ok(b.Mailbox(t.Context(), "p", ""))(t); len(left) != 5 {
		t.Errorf("peeking collected something: %d left", len(left))
	}
	ok(b.Collect(t.Context(), "p", "", false, 2))(t)
	if n, items := ok2(b.MailPeek(t.Context(), "p", 10))(t); n != 3 || len(items) != 3 || items[2].Message.Body != "m2" {
		t.Errorf("peek after collecting two: %d waiting, %d items", n, len(items))
	}

	if m := ok(b.SessionMark(t.Context(), "p", "s1"))(t); m != "" {
		t.Errorf("mark of a new session: %q", m)
	}
	if err := b.SetSessionMark(t.Context(), "p", "s1", "abc"); err != nil {
		t.Fatal(err)
	}
	if m := ok(b.SessionMark(t.Context(), "p", "s1"))(t); m != "abc" {
		t.Errorf("mark: %q, want abc", m)
	}
	if m := ok(b.SessionMark(t.Context(), "p", "s2"))(t); m != "" {
		t.Errorf("another session sees the mark: %q", m)
	}
	if m := ok(b.SessionMark(t.Context(), "q", "s1"))(t); m != "" {
		t.Errorf("another agent sees the mark: %q", m)
	}
}
