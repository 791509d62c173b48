package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
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

// dag returns the waits of n agents shaped as a DAG: agent i waits on
// every agent j > i (n(n-1)/2 waits, 2^(n-2) paths from the first agent
// to the last), the agents named in that order.
func dag(n int) []inbox.WaitEdge {
	var edges []inbox.WaitEdge
	for i := range n {
		for j := i + 1; j < n; j++ {
			edges = append(edges, inbox.WaitEdge{From: fmt.Sprintf("w%02d", i), To: fmt.Sprintf("w%02d", j), Reason: inbox.WaitRequest})
		}
	}
	return edges
}

// TestCyclesOfADAG: waits shaped as a DAG have no cycle, however many
// paths they make (28 agents took 13.7 s, 31 over a minute, when the
// search walked every path).
func TestCyclesOfADAG(t *testing.T) {
	for _, n := range []int{28, 31} {
		if got := inbox.Cycles(dag(n)); len(got) != 0 {
			t.Errorf("%d agents: cycles %v", n, got)
		}
	}
}

// oldCycles is the search Cycles made before it looked for strongly
// connected components first: from each agent in order, every path back
// to it through greater agents, exponential in the number of agents (but
// plainly right). It stops at limit cycles (< 0: none).
func oldCycles(edges []inbox.WaitEdge, limit int) [][]string {
	next := map[string][]string{}
	for _, e := range edges {
		if e.From != e.To && !slices.Contains(next[e.From], e.To) {
			next[e.From] = append(next[e.From], e.To)
		}
	}
	var nodes []string
	for n := range next {
		nodes = append(nodes, n)
		slices.Sort(next[n])
	}
	slices.Sort(nodes)
	out := [][]string{}
	for _, s := range nodes {
		path := []string{s}
		on := map[string]bool{s: true}
		var walk func(n string)
		walk = func(n string) {
			for _, m := range next[n] {
				if len(out) == limit {
					return
				}
				switch {
				case m == s:
					out = append(out, slices.Clone(path))
				case m > s && !on[m]:
					on[m] = true
					path = append(path, m)
					walk(m)
					path = path[:len(path)-1]
					on[m] = false
				}
			}
		}
		walk(s)
	}
	slices.SortFunc(out, func(a, b []string) int { return slices.Compare(a, b) })
	return out
}

// randomWaits returns up to m random waits among n agents, self-waits
// and the same pair twice (for another reason) included, the agents
// named so that the order of names is not the order of numbers.
func randomWaits(r *rand.Rand, n, m int) []inbox.WaitEdge {
	names := []string{"a", "b", "aa", "ab", "b1", "c", "ba", "z", "lead", "w"}[:n]
	reasons := []string{inbox.WaitBlocked, inbox.WaitRequest, inbox.WaitForReply}
	var edges []inbox.WaitEdge
	for range m {
		edges = append(edges, inbox.WaitEdge{From: names[r.IntN(n)], To: names[r.IntN(n)], Reason: reasons[r.IntN(len(reasons))]})
	}
	return edges
}

// TestCyclesAsBefore: on small random graphs the search lists what the
// old one did, truncated at the same cycle when there are more than 100,
// and says when it did.
func TestCyclesAsBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 1))
	truncated := 0
	for i := range 3000 {
		n := 1 + r.IntN(8)
		edges := randomWaits(r, n, r.IntN(n*n+4))
		all := oldCycles(edges, -1)
		got, more, err := inbox.CyclesContext(t.Context(), edges)
		if err != nil {
			t.Fatal(err)
		}
		if want := oldCycles(edges, 100); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("graph %d %v:\ncycles %v\nbefore %v", i, edges, got, want)
		}
		if more != (len(all) > 100) {
			t.Fatalf("graph %d %v: truncated %v with %d cycles", i, edges, more, len(all))
		}
		if more {
			truncated++
		}
	}
	if truncated == 0 {
		t.Error("no graph had more than 100 cycles: the truncation was not compared")
	}
}

// TestCyclesTruncated: exactly 100 cycles are all listed; one more and the
// first 100 are, saying so.
func TestCyclesTruncated(t *testing.T) {
	star := func(n int) []inbox.WaitEdge {
		var edges []inbox.WaitEdge
		for i := range n {
			w := fmt.Sprintf("w%03d", i)
			edges = append(edges, inbox.WaitEdge{From: "lead", To: w}, inbox.WaitEdge{From: w, To: "lead"})
		}
		return edges
	}
	got, more, err := inbox.CyclesContext(t.Context(), star(100))
	if err != nil || len(got) != 100 || more {
		t.Errorf("100 cycles: %d listed, truncated %v, %v", len(got), more, err)
	}
	got, more, err = inbox.CyclesContext(t.Context(), star(101))
	if err != nil || !more || fmt.Sprint(got) != fmt.Sprint(oldCycles(star(101), -1)[:100]) {
		t.Errorf("101 cycles: %d listed, truncated %v, %v", len(got), more, err)
	}
}

// complete returns the waits of n agents each waiting on every other.
func complete(n int) []inbox.WaitEdge {
	var edges []inbox.WaitEdge
	for i := range n {
		for j := range n {
			edges = append(edges, inbox.WaitEdge{From: fmt.Sprintf("w%d", i), To: fmt.Sprintf("w%d", j)})
		}
	}
	return edges
}

// TestCyclesWorkBound: a search that runs out of steps lists the first
// cycles in sorted order, and says it stopped; given enough, it lists
// every one.
func TestCyclesWorkBound(t *testing.T) {
	edges := complete(8)
	all := oldCycles(edges, -1) // 13,699
	got, more, err := inbox.FindCycles(t.Context(), edges, len(all), 1<<30)
	if err != nil || more || fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("unbounded: %d of %d cycles, truncated %v, %v", len(got), len(all), more, err)
	}
	for _, steps := range []int{1, 10, 100, 1000, 10000, 100000} {
		got, more, err := inbox.FindCycles(t.Context(), edges, len(all), steps)
		if err != nil || !more || len(got) == len(all) || fmt.Sprint(got) != fmt.Sprint(all[:len(got)]) {
			t.Errorf("%d steps: %d of %d cycles, truncated %v, %v", steps, len(got), len(all), more, err)
		}
	}
}

// bigSCC returns the waits of n agents on a ring, with m more at random:
// one strongly connected component of them all.
func bigSCC(r *rand.Rand, n, m int) []inbox.WaitEdge {
	name := func(i int) string { return fmt.Sprintf("a%04d", i) }
	var edges []inbox.WaitEdge
	for i := range n {
		edges = append(edges, inbox.WaitEdge{From: name(i), To: name((i + 1) % n), Reason: inbox.WaitBlocked})
	}
	for range m {
		edges = append(edges, inbox.WaitEdge{From: name(r.IntN(n)), To: name(r.IntN(n)), Reason: inbox.WaitRequest})
	}
	return edges
}

// TestCyclesCancelled: the search stops when its context ends.
func TestCyclesCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := inbox.CyclesContext(ctx, bigSCC(rand.New(rand.NewPCG(1, 2)), 5000, 20000))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled search: %v", err)
	}
}

// BenchmarkCycles: 1,000 agents and 10,000 waits, as a random DAG, as
// random waits (cycles among most of them), as one component of all.
func BenchmarkCycles(b *testing.B) {
	const n, m = 1000, 10000
	r := rand.New(rand.NewPCG(31, 31))
	perm := r.Perm(n) // names not in the DAG's order
	name := func(i int) string { return fmt.Sprintf("a%04d", perm[i]) }
	var dag, random []inbox.WaitEdge
	for len(dag) < m {
		i, j := r.IntN(n), r.IntN(n)
		if i < j {
			dag = append(dag, inbox.WaitEdge{From: name(i), To: name(j), Reason: inbox.WaitRequest})
		}
	}
	for range m {
		random = append(random, inbox.WaitEdge{From: name(r.IntN(n)), To: name(r.IntN(n)), Reason: inbox.WaitRequest})
	}
	for _, bc := range []struct {
		name  string
		edges []inbox.WaitEdge
	}{
		{"DAG", dag},
		{"Random", random},
		{"OneSCC", bigSCC(r, n, m-n)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := inbox.CyclesContext(b.Context(), bc.edges); err != nil {
					b.Fatal(err)
				}
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
