package spool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/index"
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
	f, err := openFile(p, os.O_CREATE|os.O_WRONLY, s.fileMode)
	if errors.Is(err, fs.ErrNotExist) {
		os.Mkdir(filepath.Dir(p), s.dirMode)
		f, err = openFile(p, os.O_CREATE|os.O_WRONLY, s.fileMode)
	}
	if err == nil {
		f.Close()
	}
}

// idleRecord is what agents/<agent> holds after an idle_notification
// (seed 002): the file's mtime is the agent's last activity, and while it
// still equals Since the notification is the newest thing the agent did.
type idleRecord struct {
	Since     string `json:"since"`
	Reason    string `json:"reason,omitempty"`
	MessageID string `json:"message_id"`
}

// noteIdle records that agent sent m, an idle notification.
func (s *Store) noteIdle(agent string, m *inbox.Message) {
	now := s.now()
	rec := idleRecord{Since: inbox.FormatTime(now), Reason: inbox.IdleReason(m), MessageID: m.MessageID}
	data, _ := json.Marshal(rec)
	p := filepath.Join(s.dir, agentsDir, agent)
	if os.WriteFile(p, data, s.fileMode) == nil {
		os.Chtimes(p, now, now)
	}
}

// idleNote returns agent's idle notification while it is the newest thing
// the agent did, else nil.
func (s *Store) idleNote(agent string) *idleRecord {
	p := filepath.Join(s.dir, agentsDir, agent)
	data, err := readFile(p)
	if err != nil || len(data) == 0 {
		return nil
	}
	var rec idleRecord
	fi, err := os.Stat(p)
	if err != nil || json.Unmarshal(data, &rec) != nil || rec.Since != inbox.FormatTime(fi.ModTime()) {
		return nil
	}
	return &rec
}

// known reports whether agent has ever acted in this store.
func (s *Store) known(agent string) bool {
	return exists(filepath.Join(s.dir, agentsDir, agent))
}

// unknownRecipients warns for each agent a message names explicitly that
// has never acted here (inbox.UnknownRecipients).
func (s *Store) unknownRecipients(ctx context.Context, m *inbox.Message) []string {
	return s.recipientWarnings(ctx, m)
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
func (s *Store) Agents(ctx context.Context) ([]*inbox.AgentInfo, error) {
	byName := map[string]*inbox.AgentInfo{}
	seen := map[string]time.Time{}
	see := func(n string, t time.Time) {
		if t.After(seen[n]) {
			seen[n] = t
		}
	}
	activity := map[string]time.Time{}
	get := func(n string) *inbox.AgentInfo {
		if inbox.ValidateAgent("agent", n) != nil {
			return nil
		}
		if byName[n] == nil {
			byName[n] = &inbox.AgentInfo{Agent: n, LiveLeases: []string{}}
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
	out := make([]*inbox.AgentInfo, 0, len(byName))
	for _, a := range byName {
		open, err := s.idx.ByAssignee(a.Agent, []string{inbox.StatusPending, inbox.StatusClaimed, inbox.StatusInProgress, inbox.StatusBlocked})
		if err != nil {
			return nil, s.indexErr(err)
		}
		counted := map[string]bool{}
		var lapsed time.Time // the latest lease of a that ran out unreleased
		// A pending thread holds no lease and says nothing of its agent
		// that its mail did not (the mailbox's time above): its index
		// entry is counted without reading its header, once the threads
		// that can hold a lease are (a thread caught by a reader between
		// two statuses is counted once). A store of 100,000 threads
		// waiting for 30 agents answers in a fraction of a second instead
		// of reading every header.
		slices.SortStableFunc(open, func(x, y index.Entry) int {
			return cmp.Compare(btoi(x.Status == inbox.StatusPending), btoi(y.Status == inbox.StatusPending))
		})
		for _, e := range open {
			if e.Status == inbox.StatusPending {
				if e.AssignedTo == a.Agent && !counted[e.ThreadID] {
					counted[e.ThreadID] = true
					a.Assigned++
				}
				continue
			}
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
		if a.MailboxDepth, err = s.mailDepth(a.Agent); err != nil {
			return nil, err
		}
		waiting, died := s.waits(a.Agent)
		see(a.Agent, died)
		if waiting {
			see(a.Agent, now)
		}
		a.State = inbox.AgentState(len(a.LiveLeases) > 0, waiting, activity[a.Agent], died, lapsed)
		if t := seen[a.Agent]; !t.IsZero() {
			a.LastSeen = inbox.FormatTime(t)
		}
		if a.Teams, err = inbox.MemberOf(ctx, teamDir{s}, a.Agent); err != nil {
			return nil, err
		}
		if a.Teams == nil {
			a.Teams = []string{}
		}
		owed, err := s.Unacknowledged(ctx, a.Agent)
		if err != nil {
			return nil, err
		}
		a.Unacknowledged = []string{}
		for _, m := range owed {
			a.Unacknowledged = append(a.Unacknowledged, m.MessageID)
		}
		if n := s.idleNote(a.Agent); n != nil && a.State == inbox.StateIdle {
			a.IdleSince, a.IdleReason = n.Since, n.Reason
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y *inbox.AgentInfo) int { return strings.Compare(x.Agent, y.Agent) })
	return out, nil
}

// parseTimeOr parses a stored timestamp, zero when it is empty or bad.
func parseTimeOr(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
