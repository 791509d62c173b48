package bustest

import (
	"slices"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
)

// Needs attention and who waits on whom (SPEC §15): the rules of package
// inbox, read through each engine.

// attentionItem returns the item of kind about thread tid, nil if none.
func attentionItem(r *inbox.AttentionReport, kind, tid string) *inbox.AttentionItem {
	for i, it := range r.Items {
		if it.Kind == kind && it.ThreadID == tid {
			return &r.Items[i]
		}
	}
	return nil
}

// pollUntil calls check until it returns true or 10 s pass: for a state
// that changes on its own (a lease running out, a wait beginning in
// another goroutine), not for one the test caused.
func pollUntil(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testAttention(t *testing.T, b inbox.Bus) {
	ctx := t.Context()
	tr := inbox.NewAttentionTracker(b)
	report := func(now time.Time) *inbox.AttentionReport {
		t.Helper()
		return ok(tr.Attention(ctx, now, inbox.AttentionOptions{}))(t)
	}

	// A blocked question: listed with who must answer, until an answer
	// lands, although the holder has not resumed.
	tid := newThread(t, b, "w", "migrate").Thread.ThreadID
	c := ok(b.Claim(ctx, "w", tid, 600))(t)
	q := ok(b.Update(ctx, "w", tid, inbox.StatusBlocked, c.Lease.LeaseToken, inbox.Content{Summary: "which database?", Body: "postgres or sqlite"}))(t)
	it := attentionItem(report(time.Now()), inbox.AttentionBlocked, tid)
	if it == nil || it.Agent != "w" || !slices.Equal(it.WaitingOn, []string{"leader"}) || it.MessageID != q.Message.MessageID ||
		it.Summary != "which database?" || it.Body != "postgres or sqlite" || it.WaitingSince != q.Message.CreatedAt {
		t.Fatalf("blocked question: %+v", it)
	}
	if r := report(time.Now().Add(time.Hour)); attentionItem(r, inbox.AttentionBlocked, tid).WaitingSeconds < 3599 {
		t.Errorf("an hour later the question waited %d s", attentionItem(r, inbox.AttentionBlocked, tid).WaitingSeconds)
	}
	// Only an answer newer than it answers it: not the holder's own
	// notes, a reply of another kind, another agent's message.
	ok(b.Reply(ctx, "w", "", tid, inbox.KindProgress, inbox.Content{Summary: "still looking"}))(t)
	if attentionItem(report(time.Now()), inbox.AttentionBlocked, tid) == nil {
		t.Fatal("the holder's own progress note answered its question")
	}
	ok(b.Reply(ctx, "leader", "w", tid, inbox.KindQuestion, inbox.Content{Summary: "which version of either?"}))(t)
	if attentionItem(report(time.Now()), inbox.AttentionBlocked, tid) == nil {
		t.Fatal("a question back answered the question")
	}
	ok(b.Reply(ctx, "x", "", tid, inbox.KindProgress, inbox.Content{Summary: "looking too"}))(t)
	if attentionItem(report(time.Now()), inbox.AttentionBlocked, tid) == nil {
		t.Fatal("another agent's progress note answered the question")
	}
	ok(b.Reply(ctx, "leader", "w", tid, inbox.KindAnswer, inbox.Content{Summary: "postgres"}))(t)
	if th := ok(b.Thread(ctx, tid))(t); th.Status != inbox.StatusBlocked {
		t.Fatalf("the answer changed the status to %s", th.Status)
	}
	if it := attentionItem(report(time.Now()), inbox.AttentionBlocked, tid); it != nil {
		t.Errorf("an answered question is still listed: %+v", it)
	}

	// A request without a response, until the response.
	req := ok(b.Send(ctx, inbox.SendInput{From: "lead", To: "w2", Subject: "status?",
		Content: inbox.Content{Type: inbox.TypeTaskStatusRequest, RequestID: "req-7"}}))(t)
	rtid := req.Thread.ThreadID
	it = attentionItem(report(time.Now()), inbox.AttentionRequest, rtid)
	if it == nil || it.Agent != "lead" || !slices.Equal(it.WaitingOn, []string{"w2"}) || it.RequestID != "req-7" || it.MessageID != req.Message.MessageID || it.Subject != "status?" {
		t.Fatalf("open request: %+v", it)
	}
	ok(b.Reply(ctx, "w2", "", rtid, "", inbox.Content{Type: inbox.TypeTaskStatusResponse, RequestID: "req-7", PayloadJSON: `{"progress":10}`}))(t)
	if it := attentionItem(report(time.Now()), inbox.AttentionRequest, rtid); it != nil {
		t.Errorf("an answered request is still listed: %+v", it)
	}

	// An acknowledgment owed past the age, by whoever still owes it.
	ask := ok(b.Send(ctx, inbox.SendInput{From: "lead", To: "a,b", Subject: "read this", Content: inbox.Content{AckRequired: true}}))(t)
	atid := ask.Thread.ThreadID
	if it := attentionItem(report(time.Now()), inbox.AttentionUnacknowledged, atid); it != nil {
		t.Errorf("an acknowledgment asked just now is listed: %+v", it)
	}
	later := time.Now().Add(inbox.DefaultAckAge + time.Minute)
	if it := attentionItem(report(later), inbox.AttentionUnacknowledged, atid); it == nil || !slices.Equal(it.WaitingOn, []string{"a", "b"}) || it.Agent != "lead" || it.Subject != "read this" {
		t.Fatalf("owed acknowledgment: %+v", it)
	}
	ok(b.Ack(ctx, "a", ask.Message.MessageID, "", inbox.Content{}))(t)
	if it := attentionItem(report(later), inbox.AttentionUnacknowledged, atid); it == nil || !slices.Equal(it.WaitingOn, []string{"b"}) {
		t.Fatalf("after a's acknowledgment: %+v", it)
	}
	ok(b.Ack(ctx, "b", ask.Message.MessageID, "", inbox.Content{}))(t)
	if it := attentionItem(report(later), inbox.AttentionUnacknowledged, atid); it != nil {
		t.Errorf("acknowledged by all, still listed: %+v", it)
	}

	// A failed task, with its failure.
	task := ok(b.Push(ctx, inbox.TaskSpec{Name: "t9", Parent: "boss", Owner: "boss"}, "do it"))(t)
	ok(b.Claim(ctx, "t9", task.ThreadID, 60))(t)
	ok(b.Fail(ctx, "t9", task.ThreadID, 0, inbox.Content{Summary: "exit status 2", Body: "no such file"}))(t)
	if it := attentionItem(report(time.Now()), inbox.AttentionFailedTask, task.ThreadID); it == nil || it.Agent != "t9" ||
		it.Summary != "exit status 2" || !slices.Equal(it.WaitingOn, []string{"boss"}) {
		t.Fatalf("failed task: %+v", it)
	}

	// A lease that ran out: expired, and its holder gone, until it is
	// taken back.
	gtid := newThread(t, b, "g", "vanishing").Thread.ThreadID
	gc := ok(b.Claim(ctx, "g", gtid, 1))(t)
	if it := attentionItem(report(time.Now()), inbox.AttentionExpiredLease, gtid); it != nil {
		t.Fatalf("a live lease is listed as expired: %+v", it)
	}
	var r *inbox.AttentionReport
	pollUntil(t, "the lease listed as expired", func() bool {
		r = report(time.Now())
		return attentionItem(r, inbox.AttentionExpiredLease, gtid) != nil
	})
	if it := attentionItem(r, inbox.AttentionExpiredLease, gtid); it.Agent != "g" || it.LeaseToken != gc.Lease.LeaseToken || it.WaitingSince != gc.Lease.ExpiresAt {
		t.Errorf("expired lease: %+v", it)
	}
	if it := attentionItem(r, inbox.AttentionGoneWithLease, gtid); it == nil || it.Agent != "g" {
		t.Errorf("gone with its lease: %+v", it)
	}
	for i := 1; i < len(r.Items); i++ {
		if r.Items[i].WaitingSince < r.Items[i-1].WaitingSince {
			t.Errorf("items not oldest first: %s after %s", r.Items[i].WaitingSince, r.Items[i-1].WaitingSince)
		}
	}
	if r.Counts[inbox.AttentionExpiredLease] != 1 || r.Counts[inbox.AttentionFailedTask] != 1 || r.Counts[inbox.AttentionRequest] != 0 {
		t.Errorf("counts %v", r.Counts)
	}
	ok(b.ExpireLease(ctx, gtid))(t)
	r = report(time.Now())
	if attentionItem(r, inbox.AttentionExpiredLease, gtid) != nil || attentionItem(r, inbox.AttentionGoneWithLease, gtid) != nil {
		t.Errorf("a lease taken back is still listed: %+v", r.Items)
	}

	// A tracker fed the events it follows agrees, whether they come in
	// order or after a gap.
	fed := inbox.NewAttentionTracker(b)
	ok(fed.Attention(ctx, time.Now(), inbox.AttentionOptions{}))(t)
	last := ok(b.LastEventID(ctx))(t)
	req2 := ok(b.Send(ctx, inbox.SendInput{From: "lead", To: "w3", Subject: "and you?", Content: inbox.Content{Request: true}}))(t)
	req3 := ok(b.Send(ctx, inbox.SendInput{From: "lead", To: "w4", Subject: "and you?", Content: inbox.Content{Request: true}}))(t)
	var evs []*inbox.Event
	if err := b.Events(ctx, last, func(ev *inbox.Event) bool { evs = append(evs, ev); return true }); err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if err := fed.Feed(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	fr := ok(fed.Attention(ctx, time.Now(), inbox.AttentionOptions{}))(t)
	if attentionItem(fr, inbox.AttentionRequest, req2.Thread.ThreadID) == nil || attentionItem(fr, inbox.AttentionRequest, req3.Thread.ThreadID) == nil {
		t.Errorf("fed tracker: %+v", fr.Items)
	}
	r = report(time.Now())

	// The one-off computation reads the whole log and agrees.
	again := ok(inbox.Attention(ctx, b, time.Now(), inbox.AttentionOptions{}))(t)
	if !slices.EqualFunc(again.Items, r.Items, func(x, y inbox.AttentionItem) bool { return x.Kind == y.Kind && x.ThreadID == y.ThreadID }) {
		t.Errorf("Attention %+v, the tracker %+v", again.Items, r.Items)
	}
}

// edgesOf lists the graph's edges as "from>to:reason".
func edgesOf(g *inbox.WaitGraphReport) []string {
	var out []string
	for _, e := range g.Edges {
		out = append(out, e.From+">"+e.To+":"+e.Reason)
	}
	return out
}

func testWaitGraph(t *testing.T, b inbox.Bus) {
	ctx := t.Context()
	tr := inbox.NewAttentionTracker(b)
	graph := func() *inbox.WaitGraphReport {
		t.Helper()
		return ok(tr.WaitGraph(ctx, time.Now()))(t)
	}
	// Two agents blocked on each other's questions: a deadlock.
	block := func(from, to, subject string) string {
		r := ok(b.Send(ctx, inbox.SendInput{From: from, To: to, Subject: subject, Content: inbox.Content{Body: subject}}))(t)
		c := ok(b.Claim(ctx, to, r.Thread.ThreadID, 600))(t)
		ok(b.Update(ctx, to, r.Thread.ThreadID, inbox.StatusBlocked, c.Lease.LeaseToken, inbox.Content{Summary: "need " + from}))(t)
		return r.Thread.ThreadID
	}
	t1 := block("a", "b", "one")
	t2 := block("b", "a", "two")
	g := graph()
	if got := edgesOf(g); !slices.Equal(got, []string{"a>b:blocked", "b>a:blocked"}) {
		t.Fatalf("edges %v", got)
	}
	if g.Edges[0].ThreadID != t2 || g.Edges[1].ThreadID != t1 {
		t.Errorf("edges' threads %+v, want %s then %s", g.Edges, t2, t1)
	}
	if len(g.Cycles) != 1 || !slices.Equal(g.Cycles[0], []string{"a", "b"}) {
		t.Errorf("cycles %v, want [[a b]]", g.Cycles)
	}
	states := map[string]string{}
	for _, n := range g.Nodes {
		states[n.ID] = n.State
	}
	if states["a"] != inbox.StateWorking || states["b"] != inbox.StateWorking {
		t.Errorf("nodes %+v", g.Nodes)
	}
	// An answer breaks it.
	ok(b.Reply(ctx, "a", "b", t1, inbox.KindAnswer, inbox.Content{Summary: "here"}))(t)
	if g := graph(); !slices.Equal(edgesOf(g), []string{"a>b:blocked"}) || len(g.Cycles) != 0 {
		t.Errorf("after the answer: edges %v cycles %v", edgesOf(g), g.Cycles)
	}

	// A request waits on its responder.
	req := ok(b.Send(ctx, inbox.SendInput{From: "c", To: "d", Subject: "status?", Content: inbox.Content{Request: true}}))(t)
	if got := edgesOf(graph()); !slices.Contains(got, "c>d:request") {
		t.Errorf("request: edges %v", got)
	}
	ok(b.Reply(ctx, "d", "", req.Thread.ThreadID, inbox.KindAnswer, inbox.Content{Summary: "fine", RequestID: req.Message.RequestID}))(t)
	if got := edgesOf(graph()); slices.Contains(got, "c>d:request") {
		t.Errorf("a responded request: edges %v", got)
	}

	// A receive in progress waits on the sender it waits for, while it
	// waits (the CLI records what it waits on around the wait).
	got := make(chan *inbox.Message, 1)
	go func() {
		defer b.WaitingOn(ctx, inbox.WaitInfo{Agent: "r", Reason: inbox.WaitOnReceive, From: "s"})()
		m, err := b.Receive(ctx, "r", "s", false, inbox.WaitOptions{Timeout: 30 * time.Second, Agent: "r"})
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()
	pollUntil(t, "the receive's wait listed", func() bool {
		return len(ok(b.Waits(ctx))(t)) == 1
	})
	w := ok(b.Waits(ctx))(t)[0]
	if w.Agent != "r" || w.Reason != inbox.WaitOnReceive || w.From != "s" || w.Since == "" {
		t.Errorf("the receive's wait: %+v", w)
	}
	if got := edgesOf(graph()); !slices.Contains(got, "r>s:receive") {
		t.Errorf("receive in progress: edges %v", got)
	}
	ok(b.Send(ctx, inbox.SendInput{From: "s", To: "r", Subject: "for you", Content: inbox.Content{Body: "x"}}))(t)
	if m := <-got; m == nil || m.FromAgent != "s" {
		t.Fatalf("receive got %+v", m)
	}
	if ws := ok(b.Waits(ctx))(t); len(ws) != 0 {
		t.Errorf("waits after the receive: %+v", ws)
	}
	if got := edgesOf(graph()); slices.Contains(got, "r>s:receive") {
		t.Errorf("after the receive: edges %v", got)
	}

	// A wait-reply waits on the thread's other party: the assignee for
	// its creator, the creator for the assignee.
	wt := newThread(t, b, "worker", "wr").Thread.ThreadID
	release := b.WaitingOn(ctx, inbox.WaitInfo{Agent: "leader", Reason: inbox.WaitForReply, ThreadID: wt})
	release2 := b.WaitingOn(ctx, inbox.WaitInfo{Agent: "worker", Reason: inbox.WaitForReply, ThreadID: wt})
	g = graph()
	if got := edgesOf(g); !slices.Contains(got, "leader>worker:wait_reply") || !slices.Contains(got, "worker>leader:wait_reply") {
		t.Errorf("wait-reply: edges %v", got)
	}
	if !slices.ContainsFunc(g.Cycles, func(c []string) bool { return slices.Equal(c, []string{"leader", "worker"}) }) {
		t.Errorf("two wait-replies on each other: cycles %v", g.Cycles)
	}
	release()
	release2()
	if ws := ok(b.Waits(ctx))(t); len(ws) != 0 {
		t.Errorf("waits after release: %+v", ws)
	}
	// The one-off computation agrees.
	if g := ok(inbox.WaitGraph(ctx, b, time.Now()))(t); !slices.Equal(edgesOf(g), []string{"a>b:blocked"}) {
		t.Errorf("WaitGraph: edges %v", edgesOf(g))
	}
}
