package inbox

import (
	"cmp"
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

// maxCycles bounds how many cycles a wait graph lists: a graph of agents
// is small, but the number of its elementary cycles can grow fast.
const maxCycles = 100

// WaitGraphReport is the wait graph: /api/waits's
// {"nodes":[…],"edges":[…],"cycles":[…]}.
type WaitGraphReport struct {
	Nodes []WaitNode `json:"nodes"`
	Edges []WaitEdge `json:"edges"`
	// Cycles are the elementary cycles of the graph (deadlocks), each
	// the agents on it, starting with the least name and in the order
	// they wait on each other; sorted.
	Cycles [][]string `json:"cycles"`
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
// nodes from Bus.Agents and the edges' ends, and the cycles.
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
	g.Cycles = Cycles(g.Edges)
	return g, nil
}

// Cycles lists the elementary cycles of the graph the edges make (edges
// between the same two agents count once), each starting with its least
// agent, sorted, at most maxCycles of them. For each agent s in order it
// looks for the paths back to s through agents greater than s only, so
// that each cycle is found once, from its least agent.
func Cycles(edges []WaitEdge) [][]string {
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
				if len(out) >= maxCycles {
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
