package spool

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
)

// Presence (SPEC §7). agents/<name> is an empty file an agent gets the
// first time it acts (sends, claims, replies, collects mail, pushes a
// task); its modification time is the agent's last activity. It is
// advisory bookkeeping, not synced: losing a touch to a crash loses
// nothing but a timestamp.

// seen records that agent acted now.
func (s *Store) seen(agent string) {
	if agent == "" || inbox.ValidateAgent("agent", agent) != nil {
		return
	}
	p := filepath.Join(s.dir, agentsDir, agent)
	now := s.now()
	if err := os.Chtimes(p, now, now); err == nil {
		return
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, s.fileMode)
	if errors.Is(err, fs.ErrNotExist) {
		os.Mkdir(filepath.Dir(p), s.dirMode)
		f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY, s.fileMode)
	}
	if err == nil {
		f.Close()
	}
}

// Known reports whether agent has ever acted in this store.
func (s *Store) Known(agent string) bool {
	return exists(filepath.Join(s.dir, agentsDir, agent))
}

// unknownRecipient returns a warning when to has never acted here, naming
// close matches among the agents that have.
func (s *Store) unknownRecipient(to string) []string {
	if to == "" || s.Known(to) {
		return nil
	}
	msg := "agent " + to + " has never been seen in this store; the message waits for it"
	if close := s.similarAgents(to); len(close) > 0 {
		msg += " (did you mean " + strings.Join(close, ", ") + "?)"
	}
	return []string{msg}
}

func (s *Store) similarAgents(name string) []string {
	entries, err := os.ReadDir(filepath.Join(s.dir, agentsDir))
	if err != nil {
		return nil
	}
	var out []string
	low := strings.ToLower(name)
	for _, e := range entries {
		n := e.Name()
		ln := strings.ToLower(n)
		if ln == low || EditDistance(ln, low) <= 2 || (len(low) >= 3 && (strings.HasPrefix(ln, low) || strings.HasPrefix(low, ln))) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), 5)]
}

// EditDistance is the Levenshtein distance between a and b, in bytes: how
// many insertions, deletions or substitutions turn one into the other.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// AgentInfo is what the store knows of an agent.
type AgentInfo struct {
	Agent string `json:"agent"`
	// State is StateWorking, StateWaiting, StateIdle or StateGone.
	State string `json:"state"`
	// LastSeen is the last time the store saw the agent in any role: it
	// acted, was sent mail, or waited.
	LastSeen string `json:"last_seen"`
	// LastActivity is when it last acted; nil if it never has (it has
	// only been sent or assigned work).
	LastActivity *string  `json:"last_activity"`
	LiveLeases   []string `json:"live_leases"`
	MailboxDepth int      `json:"mailbox_depth"`
	Assigned     int      `json:"open_threads"`
}

// Agents lists every agent the store has seen act, been assigned a thread
// or been sent mail, with its state, when it was last seen and last
// acted, its live leases and mailbox depth: enough to tell an idle agent
// from a dead one.
//
// States: working holds a live lease; waiting has a process blocked for
// it now (proven by the lock that process holds, see presence.go); gone
// held a lease that expired unreleased, or died while waiting, and has
// not acted since; idle is everything else.
func (s *Store) Agents() ([]*AgentInfo, error) {
	byName := map[string]*AgentInfo{}
	seen := map[string]time.Time{}
	see := func(n string, t time.Time) {
		if t.After(seen[n]) {
			seen[n] = t
		}
	}
	activity := map[string]time.Time{}
	get := func(n string) *AgentInfo {
		if inbox.ValidateAgent("agent", n) != nil {
			return nil
		}
		if byName[n] == nil {
			byName[n] = &AgentInfo{Agent: n, LiveLeases: []string{}}
		}
		return byName[n]
	}
	if entries, err := os.ReadDir(filepath.Join(s.dir, agentsDir)); err == nil {
		for _, e := range entries {
			if a := get(e.Name()); a != nil {
				if fi, err := e.Info(); err == nil {
					t := inbox.FormatTime(fi.ModTime())
					a.LastActivity = &t
					activity[a.Agent] = fi.ModTime()
					see(a.Agent, fi.ModTime())
				}
			}
		}
	}
	// A mailbox directory changes whenever mail is delivered to it or
	// collected from it.
	if entries, err := os.ReadDir(filepath.Join(s.dir, mailboxDir)); err == nil {
		for _, e := range entries {
			if a := get(e.Name()); a != nil {
				if fi, err := e.Info(); err == nil {
					see(a.Agent, fi.ModTime())
				}
			}
		}
	}
	if entries, err := os.ReadDir(filepath.Join(s.dir, presenceDir)); err == nil {
		for _, e := range entries {
			get(e.Name())
		}
	}
	assignees, err := s.idx.Agents()
	if err != nil {
		return nil, s.indexErr(err)
	}
	for _, n := range assignees {
		get(n)
	}
	now := time.Now()
	out := make([]*AgentInfo, 0, len(byName))
	for _, a := range byName {
		open, err := s.idx.ByAssignee(a.Agent, []string{inbox.StatusPending, inbox.StatusClaimed, inbox.StatusInProgress, inbox.StatusBlocked})
		if err != nil {
			return nil, s.indexErr(err)
		}
		counted := map[string]bool{}
		var lapsed time.Time // the latest lease of a that ran out unreleased
		for _, e := range open {
			h, err := s.readHeader(e.ThreadID)
			if err != nil || h.Status != e.Status || h.AssignedTo != a.Agent || counted[e.ThreadID] {
				continue
			}
			counted[e.ThreadID] = true
			a.Assigned++
			see(a.Agent, parseTimeOr(h.UpdatedAt))
			l := h.Lease
			if l == nil || l.AgentID != a.Agent || l.Released() {
				continue
			}
			if l.Live(now) {
				a.LiveLeases = append(a.LiveLeases, h.ThreadID)
			} else if exp := parseTimeOr(l.ExpiresAt); exp.After(lapsed) {
				lapsed = exp
			}
		}
		mail, err := s.mailItems(a.Agent, "") // counted, not read
		if err != nil {
			return nil, err
		}
		a.MailboxDepth = len(mail)
		waiting, died := s.waits(a.Agent)
		see(a.Agent, died)
		if waiting {
			see(a.Agent, now)
		}
		switch last := activity[a.Agent]; {
		case len(a.LiveLeases) > 0:
			a.State = StateWorking
		case waiting:
			a.State = StateWaiting
		case died.After(last) || lapsed.After(last):
			a.State = StateGone
		default:
			a.State = StateIdle
		}
		if t := seen[a.Agent]; !t.IsZero() {
			a.LastSeen = inbox.FormatTime(t)
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y *AgentInfo) int { return strings.Compare(x.Agent, y.Agent) })
	return out, nil
}

// parseTimeOr parses a stored timestamp, zero when it is empty or bad.
func parseTimeOr(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}
