package inbox_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/spool"
)

func TestCycles(t *testing.T) {
	e := func(from, to string) inbox.WaitEdge {
		return inbox.WaitEdge{From: from, To: to, Reason: inbox.WaitBlocked}
	}
	for _, tc := range []struct {
		name  string
		edges []inbox.WaitEdge
		want  string
	}{
		{"none", nil, "[]"},
		{"a chain", []inbox.WaitEdge{e("a", "b"), e("b", "c")}, "[]"},
		{"two on each other", []inbox.WaitEdge{e("b", "a"), e("a", "b")}, "[[a b]]"},
		{"twice the same pair", []inbox.WaitEdge{e("a", "b"), e("b", "a"), {From: "a", To: "b", Reason: inbox.WaitRequest}}, "[[a b]]"},
		{"a ring of three", []inbox.WaitEdge{e("c", "a"), e("a", "b"), e("b", "c")}, "[[a b c]]"},
		{"two rings through one agent", []inbox.WaitEdge{e("a", "b"), e("b", "a"), e("b", "c"), e("c", "b")}, "[[a b] [b c]]"},
		{"a self-wait is no cycle", []inbox.WaitEdge{e("a", "a")}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(inbox.Cycles(tc.edges)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// BenchmarkAttention measures the needs-attention list and the wait graph
// on the store INBOX_BENCH_DB names (go run ./bench/genstore DB 100000),
// as the dashboard asks them on every change: with a tracker that has
// read the log already.
func BenchmarkAttention(b *testing.B) {
	db := os.Getenv("INBOX_BENCH_DB")
	if db == "" {
		b.Fatal("set INBOX_BENCH_DB to a store made with go run ./bench/genstore DB N")
	}
	s, err := spool.Open(b.Context(), db, spool.Options{})
	if err != nil {
		b.Fatal(err)
	}
	tr := inbox.NewAttentionTracker(s)
	start := time.Now()
	if _, err := tr.Attention(b.Context(), time.Now(), inbox.AttentionOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Logf("first call (reads the whole log): %v", time.Since(start))
	b.Run("Attention", func(b *testing.B) {
		for b.Loop() {
			if _, err := tr.Attention(b.Context(), time.Now(), inbox.AttentionOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WaitGraph", func(b *testing.B) {
		for b.Loop() {
			if _, err := tr.WaitGraph(b.Context(), time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Agents", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Agents(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
