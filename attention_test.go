package inbox_test

import (
	"slices"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestBlockedQuestionLeavesOnAnswer: a blocked question stays in Needs
// attention, and its holder keeps waiting on who must answer in the wait
// graph, until an answer newer than the question is in the thread (SPEC
// §15): a progress note, a reply of another kind, another agent's message
// do not clear it, nor does an answer older than a new question.
func TestBlockedQuestionLeavesOnAnswer(t *testing.T) {
	ctx := t.Context()
	b, _ := storetest.New(t, spool.Options{})
	tr := inbox.NewAttentionTracker(b)
	must := func(_ *inbox.Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	listed := func() *inbox.AttentionItem {
		t.Helper()
		r, err := tr.Attention(ctx, time.Now(), inbox.AttentionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range r.Items {
			if it.Kind == inbox.AttentionBlocked {
				return &r.Items[i]
			}
		}
		return nil
	}
	waitsOnLead := func() bool {
		t.Helper()
		g, err := tr.WaitGraph(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(g.Edges, func(e inbox.WaitEdge) bool {
			return e.From == "w" && e.To == "lead" && e.Reason == inbox.WaitBlocked
		})
	}

	sent, err := b.Send(ctx, inbox.SendInput{From: "lead", To: "w", Subject: "migrate", Content: inbox.Content{Body: "do it"}})
	if err != nil {
		t.Fatal(err)
	}
	tid := sent.Thread.ThreadID
	c, err := b.Claim(ctx, "w", tid, 600)
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.Update(ctx, "w", tid, inbox.StatusBlocked, c.Lease.LeaseToken, inbox.Content{Summary: "which database?"})
	if err != nil {
		t.Fatal(err)
	}
	if it := listed(); it == nil || it.MessageID != q.Message.MessageID || !waitsOnLead() {
		t.Fatalf("the blocked question: %+v", it)
	}
	for _, post := range []struct {
		what           string
		from, to, kind string
	}{
		{"the holder's progress note", "w", "", inbox.KindProgress},
		{"the asked agent's question back", "lead", "w", inbox.KindQuestion},
		{"the asked agent's progress note", "lead", "w", inbox.KindProgress},
		{"another agent's progress note", "x", "", inbox.KindProgress},
		{"another agent's question", "x", "w", inbox.KindQuestion},
	} {
		must(b.Reply(ctx, post.from, post.to, tid, post.kind, inbox.Content{Summary: post.what}))
		if it := listed(); it == nil || it.MessageID != q.Message.MessageID {
			t.Errorf("after %s the question is no longer listed: %+v", post.what, it)
		}
		if !waitsOnLead() {
			t.Errorf("after %s w no longer waits on lead", post.what)
		}
	}
	must(b.Reply(ctx, "lead", "w", tid, inbox.KindAnswer, inbox.Content{Summary: "postgres"}))
	if it := listed(); it != nil {
		t.Errorf("an answered question is still listed: %+v", it)
	}
	if waitsOnLead() {
		t.Error("w still waits on lead after the answer")
	}
	// A new question: the answer before it does not answer it.
	must(b.Update(ctx, "w", tid, inbox.StatusInProgress, c.Lease.LeaseToken, inbox.Content{Summary: "migrating"}))
	q2, err := b.Update(ctx, "w", tid, inbox.StatusBlocked, c.Lease.LeaseToken, inbox.Content{Summary: "which version?"})
	if err != nil {
		t.Fatal(err)
	}
	if it := listed(); it == nil || it.MessageID != q2.Message.MessageID {
		t.Fatalf("the second question: %+v", it)
	}
	must(b.Reply(ctx, "x", "w", tid, inbox.KindAnswer, inbox.Content{Summary: "16"}))
	if it := listed(); it != nil {
		t.Errorf("a question answered by another agent is still listed: %+v", it)
	}
}
