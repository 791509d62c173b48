package inbox

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Who waits on whom (SPEC §15): the dashboard's graph of waits, computed
// from what any Bus can say, so that it reads the same on every backend.
// An agent waits on another when
//   - it holds a blocked thread whose question that agent must answer
//     (reason "blocked"), until an answer lands;
//   - it sent a request (a message with a request id) that agent must
//     respond to (reason "request"), until a later message of the thread
//     carries the same request id;
//   - a wait-reply of it is in progress in a thread of which that agent
//     is the other party (reason "wait_reply": OtherParty, the thread's
//     creator for its assignee and the assignee for anyone else);
//   - a receive of it is in progress for mail from that agent (reason
//     "receive"; a receive from anyone waits on no one in particular).
// A cycle of waits is a deadlock: none of its agents moves until another
// one does.

// Reasons of an edge of the wait graph, and of a wait recorded with
// Bus.WaitingOn.
const (
	WaitBlocked   = "blocked"
	WaitRequest   = "request"
	WaitForReply  = "wait_reply"
	WaitOnReceive = "receive"
)

// WaitInfo is a wait in progress that recorded what it waits on
// (Bus.WaitingOn, Bus.Waits).
type WaitInfo struct {
	// Agent is who waits.
	Agent string `json:"agent"`
	// Reason is WaitForReply or WaitOnReceive.
	Reason string `json:"reason"`
	// ThreadID is the thread a wait-reply waits in.
	ThreadID string `json:"thread_id,omitempty"`
	// From is the sender a receive waits for ("" for anyone).
	From string `json:"from,omitempty"`
	// Since is when the wait began (the engine sets it).
	Since string `json:"since,omitempty"`
}

// maxCycles bounds how many cycles a wait graph lists: the number of
// elementary cycles can grow exponentially with the graph.
const maxCycles = 100

// WaitGraphReport is the wait graph: /api/waits's
// {"nodes":[…],"edges":[…],"cycles":[…]}.
type WaitGraphReport struct {
	Nodes []WaitNode `json:"nodes"`
	Edges []WaitEdge `json:"edges"`
	// Cycles are the elementary cycles of the graph (deadlocks), each
	// the agents on it, starting with the least name and in the order
	// they wait on each other; sorted. At most maxCycles (100): when a
	// graph has more, or its search ran out of its work bound,
	// CyclesTruncated is true and Cycles are the first in that order.
	Cycles          [][]string `json:"cycles"`
	CyclesTruncated bool       `json:"cycles_truncated,omitempty"`
}

// WaitNode is an agent of the wait graph.
type WaitNode struct {
	ID string `json:"id"`
	// State is the agent's (AgentInfo.State), or "unknown" for an agent
	// named by a message (who must answer, respond or send) that the
	// store has never seen.
	State string `json:"state"`
}

// WaitEdge says that From waits on To, for Reason, in ThreadID (empty
// for a receive).
type WaitEdge struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Reason   string `json:"reason"`
	ThreadID string `json:"thread_id"`
}

// StateUnknown is a wait graph node's state for an agent the store has
// never seen.
const StateUnknown = "unknown"

// WaitGraph computes the wait graph of bus at now, reading the whole
// event log once to find the open requests; a caller that asks again
// keeps an AttentionTracker and calls its WaitGraph instead.
func WaitGraph(ctx context.Context, bus Bus, now time.Time) (*WaitGraphReport, error) {
	return NewAttentionTracker(bus).WaitGraph(ctx, now)
}

// WaitGraph computes the wait graph at now: the edges from the blocked
// questions, the open requests and the waits in progress (Bus.Waits), the
// nodes from Bus.Agents and the edges' ends, and the cycles
// (CyclesContext, which stops when ctx ends).
func (t *AttentionTracker) WaitGraph(ctx context.Context, now time.Time) (*WaitGraphReport, error) {
	g := &WaitGraphReport{Nodes: []WaitNode{}, Edges: []WaitEdge{}, Cycles: [][]string{}}
	seen := map[WaitEdge]bool{}
	edge := func(e WaitEdge) {
		if e.From == "" || e.To == "" || e.From == e.To || seen[e] {
			return
		}
		seen[e] = true
		g.Edges = append(g.Edges, e)
	}
	qs, err := t.blockedQuestions(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		for _, to := range q.answerers {
			edge(WaitEdge{From: q.holder, To: to, Reason: WaitBlocked, ThreadID: q.thread.ThreadID})
		}
	}
	reqs, err := t.openRequests(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		for _, to := range r.responders {
			edge(WaitEdge{From: r.from, To: to, Reason: WaitRequest, ThreadID: r.thread})
		}
	}
	waits, err := t.bus.Waits(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the waits in progress: %w", err)
	}
	for _, w := range waits {
		switch w.Reason {
		case WaitOnReceive:
			edge(WaitEdge{From: w.Agent, To: w.From, Reason: WaitOnReceive})
		case WaitForReply:
			th, err := t.bus.Thread(ctx, w.ThreadID)
			if err != nil {
				continue // gone meanwhile (archived): it waits on no one
			}
			to, several := OtherParty(th, w.Agent)
			if several == nil {
				several = []string{to}
			}
			for _, to := range several {
				edge(WaitEdge{From: w.Agent, To: to, Reason: WaitForReply, ThreadID: w.ThreadID})
			}
		}
	}
	slices.SortFunc(g.Edges, func(a, b WaitEdge) int {
		return cmp.Or(strings.Compare(a.From, b.From), strings.Compare(a.To, b.To),
			strings.Compare(a.Reason, b.Reason), strings.Compare(a.ThreadID, b.ThreadID))
	})
	agents, err := t.bus.Agents(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the agents: %w", err)
	}
	known := map[string]bool{}
	for _, a := range agents {
		known[a.Agent] = true
		g.Nodes = append(g.Nodes, WaitNode{ID: a.Agent, State: a.State})
	}
	for _, e := range g.Edges {
		for _, n := range []string{e.From, e.To} {
			if !known[n] {
				known[n] = true
				g.Nodes = append(g.Nodes, WaitNode{ID: n, State: StateUnknown})
			}
		}
	}
	slices.SortFunc(g.Nodes, func(a, b WaitNode) int { return strings.Compare(a.ID, b.ID) })
	g.Cycles, g.CyclesTruncated, err = CyclesContext(ctx, g.Edges)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// maxCycleSteps bounds the work of one cycle search after its linear
// first pass, in edges followed (some tens of milliseconds): Johnson's
// search costs at most the graph's size per cycle it lists, so that
// maxCycles bounds it already, and this keeps a huge graph from holding a
// core for long either.
const maxCycleSteps = 1 << 22

// Cycles lists the elementary cycles of the graph the edges make (edges
// between the same two agents count once, an agent's wait on itself is
// none), each starting with its least agent and in the order they wait
// on each other, sorted: at most maxCycles of them, the first ones in
// that order when the graph has more. It is CyclesContext without a
// context and without saying whether it listed them all.
func Cycles(edges []WaitEdge) [][]string {
	c, _, _ := CyclesContext(context.Background(), edges)
	return c
}

// CyclesContext lists the cycles as Cycles does; truncated says it
// stopped before it listed them all: the graph has more than maxCycles,
// or it might have more than maxCycleSteps of work finds. The cycles
// listed are then the first ones in sorted order. It stops with ctx's
// error when ctx ends.
//
// It costs time linear in the graph's size when the graph has no cycle
// (a DAG, however many paths it has) and is output-sensitive otherwise:
// the strongly connected components first (Tarjan's algorithm, without
// recursion), then, from the least agent of each component of two or
// more, the circuits through it within its component (Johnson's
// algorithm, whose blocked agents are never walked again until a path
// from them back to the start frees them), then the same on what the
// component leaves without that agent. Each start finds at least one
// cycle, and the work between two cycles found is at most the graph's
// size. Starts are taken in ascending order and each agent's waits
// followed in ascending order, so the cycles come out sorted: wherever
// the search stops, it has the first ones.
func CyclesContext(ctx context.Context, edges []WaitEdge) (cycles [][]string, truncated bool, err error) {
	return findCycles(ctx, edges, maxCycles, maxCycleSteps)
}

// findCycles is CyclesContext with its bounds given: at most limit
// cycles, at most maxSteps edges followed after the first pass.
func findCycles(ctx context.Context, edges []WaitEdge, limit, maxSteps int) ([][]string, bool, error) {
	// Agents are numbered in the order of their names, so that the order
	// of numbers is the order of cycles.
	id := map[string]int32{}
	for _, e := range edges {
		if e.From != e.To {
			id[e.From], id[e.To] = 0, 0
		}
	}
	names := make([]string, 0, len(id))
	for n := range id {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		id[n] = int32(i)
	}
	adj := make([][]int32, len(names))
	for _, e := range edges {
		if e.From != e.To {
			f := id[e.From]
			adj[f] = append(adj[f], id[e.To])
		}
	}
	for i := range adj {
		slices.Sort(adj[i])
		adj[i] = slices.Compact(adj[i])
	}
	c := newCycleSearch(ctx, names, adj, limit)
	all := make([]int32, len(names))
	for i := range all {
		all[i] = int32(i)
	}
	comps, err := c.components(all, 0)
	if err != nil {
		return nil, false, err
	}
	c.maxSteps = c.steps + maxSteps
	var todo componentHeap
	c.keep(&todo, comps)
	for len(todo) > 0 {
		comp := heap.Pop(&todo).([]int32)
		s, g := comp[0], c.group[comp[0]]
		if stop, err := c.circuits(s, g); stop || err != nil {
			c.sort()
			return c.out, stop, err
		}
		c.group[s] = -1
		comps, err := c.components(comp[1:], g)
		if err != nil {
			return nil, false, err
		}
		c.keep(&todo, comps)
	}
	c.sort()
	return c.out, false, nil
}

// cycleSearch is the state of a cycle search over agents numbered 0…n-1.
type cycleSearch struct {
	ctx      context.Context
	names    []string
	adj      [][]int32 // whom each agent waits on, ascending, without repeats
	limit    int
	out      [][]string
	steps    int
	maxSteps int // after the first pass, 0 before
	// group is the strongly connected set an agent is in while it is
	// searched (a component, or what is left of one), -1 when it is on no
	// cycle still to list; groups counts the sets numbered.
	group  []int32
	groups int32
	// Tarjan's: index is 1 + the order of visit (0: not visited).
	index, low []int32
	onStack    []bool
	stack      []int32
	// Johnson's: an agent is blocked while no path from it back to the
	// start avoids the current path; unblocking a unblocks those in b[a].
	blocked []bool
	b       [][]int32
	inB     map[[2]int32]bool
}

func newCycleSearch(ctx context.Context, names []string, adj [][]int32, limit int) *cycleSearch {
	n := len(names)
	return &cycleSearch{ctx: ctx, names: names, adj: adj, limit: limit, out: [][]string{},
		group: make([]int32, n), groups: 1,
		index: make([]int32, n), low: make([]int32, n), onStack: make([]bool, n),
		blocked: make([]bool, n), b: make([][]int32, n), inB: map[[2]int32]bool{}}
}

// step counts an edge followed: the search stops when ctx ends, or after
// maxSteps (stop true).
func (c *cycleSearch) step() (stop bool, err error) {
	c.steps++
	if c.steps&1023 == 0 {
		if err := c.ctx.Err(); err != nil {
			return true, fmt.Errorf("look for cycles of waits: %w", err)
		}
	}
	return c.maxSteps > 0 && c.steps > c.maxSteps, nil
}

// components returns the strongly connected components of the graph the
// agents vs (all of group g) make with the edges between them, each
// ascending (Tarjan's algorithm, its recursion an explicit stack).
func (c *cycleSearch) components(vs []int32, g int32) ([][]int32, error) {
	for _, v := range vs {
		c.index[v] = 0
	}
	type frame struct{ v, i int32 }
	var comps [][]int32
	var calls []frame
	next := int32(0)
	visit := func(v int32) {
		next++
		c.index[v], c.low[v] = next, next
		c.stack = append(c.stack, v)
		c.onStack[v] = true
		calls = append(calls, frame{v: v})
	}
	for _, root := range vs {
		if c.index[root] != 0 {
			continue
		}
		visit(root)
		for len(calls) > 0 {
			fr := &calls[len(calls)-1]
			v := fr.v
			if int(fr.i) < len(c.adj[v]) {
				w := c.adj[v][fr.i]
				fr.i++
				if _, err := c.step(); err != nil {
					return nil, err
				}
				switch {
				case c.group[w] != g:
				case c.index[w] == 0:
					visit(w)
				case c.onStack[w]:
					c.low[v] = min(c.low[v], c.index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				p := calls[len(calls)-1].v
				c.low[p] = min(c.low[p], c.low[v])
			}
			if c.low[v] == c.index[v] {
				i := len(c.stack) - 1
				for c.stack[i] != v {
					i--
				}
				comp := slices.Clone(c.stack[i:])
				for _, w := range comp {
					c.onStack[w] = false
				}
				c.stack = c.stack[:i]
				slices.Sort(comp)
				comps = append(comps, comp)
			}
		}
	}
	return comps, nil
}

// keep puts the components of two agents or more in todo, each its own
// group; the agents of the others are on no cycle (self-waits are none).
func (c *cycleSearch) keep(todo *componentHeap, comps [][]int32) {
	for _, comp := range comps {
		if len(comp) < 2 {
			c.group[comp[0]] = -1
			continue
		}
		c.groups++
		for _, v := range comp {
			c.group[v] = c.groups
		}
		heap.Push(todo, comp)
	}
}

// circuits lists the cycles through s, the least agent of group g, within
// g (Johnson's CIRCUIT, its recursion an explicit stack), in ascending
// order; stop says it found one more than c.limit allows, or ran out of
// steps.
func (c *cycleSearch) circuits(s, g int32) (stop bool, err error) {
	type frame struct {
		v, i  int32
		found bool // a cycle was found through v on this path
	}
	path := []int32{s}
	calls := []frame{{v: s}}
	c.blocked[s] = true
	touched := []int32{s}
	defer func() {
		for _, v := range touched {
			c.blocked[v] = false
			c.b[v] = c.b[v][:0]
		}
		clear(c.inB)
	}()
	for len(calls) > 0 {
		fr := &calls[len(calls)-1]
		v := fr.v
		if int(fr.i) < len(c.adj[v]) {
			w := c.adj[v][fr.i]
			fr.i++
			if stop, err := c.step(); stop {
				return true, err
			}
			switch {
			case c.group[w] != g:
			case w == s:
				if len(c.out) == c.limit {
					return true, nil
				}
				cyc := make([]string, len(path))
				for i, p := range path {
					cyc[i] = c.names[p]
				}
				c.out = append(c.out, cyc)
				fr.found = true
			case !c.blocked[w]:
				c.blocked[w] = true
				touched = append(touched, w)
				path = append(path, w)
				calls = append(calls, frame{v: w})
			}
			continue
		}
		if fr.found {
			if stop, err := c.unblock(v); stop {
				return true, err
			}
		} else {
			for _, w := range c.adj[v] {
				if c.group[w] == g && !c.inB[[2]int32{w, v}] {
					c.inB[[2]int32{w, v}] = true
					c.b[w] = append(c.b[w], v)
				}
			}
		}
		found := fr.found
		calls = calls[:len(calls)-1]
		path = path[:len(path)-1]
		if found && len(calls) > 0 {
			calls[len(calls)-1].found = true
		}
	}
	return false, nil
}

// unblock unblocks u, and the agents blocked because their way back went
// through it.
func (c *cycleSearch) unblock(u int32) (stop bool, err error) {
	c.blocked[u] = false
	work := []int32{u}
	for len(work) > 0 {
		x := work[len(work)-1]
		work = work[:len(work)-1]
		for _, w := range c.b[x] {
			if stop, err := c.step(); stop {
				return true, err
			}
			delete(c.inB, [2]int32{x, w})
			if c.blocked[w] {
				c.blocked[w] = false
				work = append(work, w)
			}
		}
		c.b[x] = c.b[x][:0]
	}
	return false, nil
}

func (c *cycleSearch) sort() {
	slices.SortFunc(c.out, func(a, b []string) int { return slices.Compare(a, b) })
}

// componentHeap holds the components still to search, least agent first.
type componentHeap [][]int32

func (h componentHeap) Len() int           { return len(h) }
func (h componentHeap) Less(i, j int) bool { return h[i][0] < h[j][0] }
func (h componentHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *componentHeap) Push(x any)        { *h = append(*h, x.([]int32)) }
func (h *componentHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
