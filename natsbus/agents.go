package natsbus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/inbox-dev/inbox"
)

// Agents and presence. What an agent did is in the subjects of the events
// it caused (<by>) and was sent (<to>); a process blocked for an agent
// answers requests on inbox.NAME.presence.<agent> for as long as its
// connection lives, so a killed waiter stops counting at once.

func (b *Bus) presenceSubject(agent string) string {
	return "inbox." + b.name + ".presence." + key(agent)
}

// Waiting marks agent as waiting until release is called: a responder on
// the agent's presence subject, and the key wait.<agent>.<id> that says an
// agent waited (left behind by a waiter that was killed, which makes the
// agent "gone" until it acts again).
func (b *Bus) Waiting(ctx context.Context, agent string) (release func()) {
	return b.register(ctx, agent, nil)
}

// register records a wait of agent; what, when given, is what the wait is
// on (WaitingOn), stored as the key's value instead of the time alone.
func (b *Bus) register(ctx context.Context, agent string, what *inbox.WaitInfo) (release func()) {
	if agent == "" || inbox.ValidateAgent("agent", agent) != nil {
		return func() {}
	}
	sub, err := b.nc.Subscribe(b.presenceSubject(agent), func(m *nats.Msg) { m.Respond([]byte("waiting")) })
	if err != nil {
		return func() {}
	}
	id := nuid.Next()
	value := []byte(inbox.FormatTime(b.now()))
	var own *nats.Subscription
	if what != nil {
		// A wait of its own answers on its own subject, so that Waits
		// tells it from a killed one of the same agent.
		what.Agent, what.Since = agent, string(value)
		value, _ = json.Marshal(what)
		if own, err = b.nc.Subscribe(b.presenceSubject(agent)+"."+id, func(m *nats.Msg) { m.Respond([]byte("waiting")) }); err != nil {
			sub.Unsubscribe()
			return func() {}
		}
	}
	b.nc.Flush()
	b.seen(ctx, agent)
	k := "wait." + key(agent) + "." + id
	rctx, cancel := b.ctx(ctx)
	b.kv.Put(rctx, k, value)
	cancel()
	return func() {
		// Released also when ctx ended (an interrupted wait): the key
		// must go all the same.
		rctx, cancel := b.ctx(context.WithoutCancel(ctx))
		b.kv.Delete(rctx, k)
		cancel()
		if own != nil {
			own.Unsubscribe()
		}
		sub.Unsubscribe()
		b.nc.Flush()
	}
}

// waits returns the agents that have waited, and when the newest wait
// of each began.
func (b *Bus) waits(ctx context.Context) map[string]time.Time {
	out := map[string]time.Time{}
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	l, err := b.kv.ListKeysFiltered(rctx, "wait.>")
	if err != nil {
		return out
	}
	for k := range l.Keys() {
		name, _, ok := agentKey(k)
		if !ok {
			continue
		}
		var at time.Time
		if e, err := b.kv.Get(rctx, k); err == nil {
			at = waitBegan(e.Value())
		}
		if at.After(out[name]) || out[name].IsZero() {
			out[name] = at
		}
	}
	return out
}

// agentKey splits a key of the bucket named <kind>.<agent>.<rest>, the
// agent in hex (key).
func agentKey(k string) (agent, rest string, ok bool) {
	parts := strings.Split(k, ".")
	if len(parts) != 3 {
		return "", "", false
	}
	name, err := hex.DecodeString(parts[1])
	return string(name), parts[2], err == nil
}

func (b *Bus) isWaiting(agent string) bool {
	_, err := b.nc.Request(b.presenceSubject(agent), nil, 500*time.Millisecond)
	return err == nil
}

// hasSubject reports whether the stream holds a message on subject.
func (b *Bus) hasSubject(ctx context.Context, subject string) bool {
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	_, err := b.stream.GetLastMsgForSubject(rctx, subject)
	return err == nil
}

// known reports whether the store has seen agent: it acted, looked at
// its mailbox, waited, was named among a message's several recipients
// (unknownRecipients), is in a team or is a task's name.
func (b *Bus) known(ctx context.Context, agent string) bool {
	t := token(agent)
	if b.hasSubject(ctx, b.prefix+"t.*.*."+t) {
		return true
	}
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	if _, err := b.kv.Get(rctx, "seen."+key(agent)); err == nil {
		return true
	}
	if teams, err := inbox.MemberOf(ctx, teamDir{b}, agent); err == nil && len(teams) > 0 {
		return true
	}
	_, err := b.TaskByName(ctx, agent)
	return err == nil
}

// unknownRecipients warns for each agent m names explicitly that the
// store had not seen before m (inbox.UnknownRecipients): m, already
// published, does not count; nor are m's other recipients offered as
// close matches.
func (b *Bus) unknownRecipients(ctx context.Context, m *inbox.Message) []string {
	names := func(ctx context.Context) []string {
		return slices.DeleteFunc(b.recentAgents(ctx), func(n string) bool { return slices.Contains(inbox.RecipientsOf(m), n) })
	}
	return inbox.UnknownRecipients(ctx, m, func(ctx context.Context, role, name string) []string {
		w := inbox.UnknownAgentWarnings(ctx, role, name, func(ctx context.Context, n string) bool { return b.seenBefore(ctx, n, m.EventID) }, names)
		if len(w) > 0 && len(m.Recipients) > 0 {
			b.seen(ctx, name) // its subject does not name it (seenBefore)
		}
		return w
	})
}

// UnknownAgentWarnings warns about an agent the store has never seen
// (inbox.UnknownAgentWarnings).
func (b *Bus) UnknownAgentWarnings(ctx context.Context, role, name string) []string {
	return inbox.UnknownAgentWarnings(ctx, role, name, func(ctx context.Context, n string) bool { return b.seenBefore(ctx, n, 0) }, b.recentAgents)
}

// seenBefore reports whether inbox agents lists agent for an event before
// event id before (0: any): it is known, or was sent mail of its own (a
// subject whose <to> is the agent) earlier. Mail sent to several at once
// is not looked for, its subject does not name them: unknownRecipients
// marks each such recipient seen once it warned.
func (b *Bus) seenBefore(ctx context.Context, agent string, before int64) bool {
	if b.known(ctx, agent) {
		return true
	}
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	first, err := b.stream.GetMsg(rctx, 1, jetstream.WithGetMsgSubject(b.prefix+"t.*."+token(agent)+".*"))
	return err == nil && (before == 0 || int64(first.Sequence) < before)
}

// recentAgents names the agents of the newest 1,000 events: a bounded
// look, made only for a name the store has never seen.
func (b *Bus) recentAgents(ctx context.Context) []string {
	last, err := b.LastEventID(ctx)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	b.records(ctx, b.prefix+">", uint64(max(last-1000, 0))+1, false, func(r *record, _ uint64) bool {
		if a := actor(r); a != "" {
			names[a] = true
		}
		if r.Message != nil {
			for _, to := range inbox.RecipientsOf(r.Message) {
				names[to] = true
			}
		}
		return true
	})
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	return out
}

// Agents reports every agent the store has seen, from one pass over the
// event log: an operator's command, not a hot path.
func (b *Bus) Agents(ctx context.Context) ([]*inbox.AgentInfo, error) {
	byName := map[string]*inbox.AgentInfo{}
	seen := map[string]time.Time{}
	activity := map[string]time.Time{}
	get := func(n string) *inbox.AgentInfo {
		if inbox.ValidateAgent("agent", n) != nil {
			return nil
		}
		if byName[n] == nil {
			byName[n] = &inbox.AgentInfo{Agent: n, LiveLeases: []string{}, Teams: []string{}, Unacknowledged: []string{}}
		}
		return byName[n]
	}
	see := func(n string, t time.Time) {
		if get(n) != nil && t.After(seen[n]) {
			seen[n] = t
		}
	}
	threads := map[string]*record{}
	delivered := map[string][]int64{}   // agent → event ids of its mail
	idle := map[string]*inbox.Message{} // agent → its idle notification, while it is its newest act
	err := b.records(ctx, b.prefix+">", 1, false, func(r *record, seq uint64) bool {
		at, _ := inbox.ParseTime(r.Event.CreatedAt)
		if a := actor(r); a != "" {
			see(a, at)
			if at.After(activity[a]) {
				activity[a] = at
			}
			idle[a] = nil
			if m := r.Message; m != nil && m.Type == inbox.TypeIdleNotification && m.FromAgent == a {
				idle[a] = m
			}
		}
		if r.Team != nil {
			for _, m := range r.Team.Members {
				get(m)
			}
		}
		if r.Thread.ThreadID != "" {
			threads[r.Thread.ThreadID] = r
			if r.Message != nil && !r.Prompt {
				for _, to := range inbox.RecipientsOf(r.Message) {
					see(to, at)
					delivered[to] = append(delivered[to], int64(seq))
				}
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	teams, err := b.Teams(ctx)
	if err != nil {
		return nil, err
	}
	waited := b.waits(ctx)
	for n := range waited {
		get(n)
	}
	now := b.now()
	lapsed := map[string]time.Time{}
	for _, r := range threads {
		t := &r.Thread
		if a := get(t.AssignedTo); a != nil && !inbox.IsTerminal(t.Status) {
			a.Assigned++
		}
		if l := r.Lease; l != nil && !l.Released() && !inbox.IsTerminal(t.Status) {
			if a := get(l.AgentID); a != nil {
				if l.Live(now) {
					a.LiveLeases = append(a.LiveLeases, t.ThreadID)
				} else if exp, err := inbox.ParseTime(l.ExpiresAt); err == nil && exp.After(lapsed[a.Agent]) {
					lapsed[a.Agent] = exp
				}
			}
		}
		for agent, owed := range r.Owed {
			if a := get(agent); a != nil {
				for _, o := range owed {
					a.Unacknowledged = append(a.Unacknowledged, o.MessageID)
				}
			}
		}
	}
	out := make([]*inbox.AgentInfo, 0, len(byName))
	for _, a := range byName {
		slices.Sort(a.LiveLeases)
		if ids := delivered[a.Agent]; len(ids) > 0 {
			done, err := b.collected(ctx, a.Agent)
			if err != nil {
				return nil, err
			}
			for _, id := range ids {
				if !done[id] {
					a.MailboxDepth++
				}
			}
		}
		for _, t := range teams {
			if slices.Contains(t.Members, a.Agent) {
				a.Teams = append(a.Teams, t.Name)
			}
		}
		waiting := false
		if _, ok := waited[a.Agent]; ok {
			waiting = b.isWaiting(a.Agent)
			if !waiting && waited[a.Agent].After(seen[a.Agent]) {
				seen[a.Agent] = waited[a.Agent]
			}
		}
		if waiting {
			seen[a.Agent] = now
		}
		if t, ok := activity[a.Agent]; ok {
			s := inbox.FormatTime(t)
			a.LastActivity = &s
		}
		a.State = inbox.AgentState(len(a.LiveLeases) > 0, waiting, activity[a.Agent], lapsed[a.Agent], waited[a.Agent])
		if t := seen[a.Agent]; !t.IsZero() {
			a.LastSeen = inbox.FormatTime(t)
		}
		if m := idle[a.Agent]; m != nil && a.State == inbox.StateIdle {
			a.IdleSince, a.IdleReason = m.CreatedAt, inbox.IdleReason(m)
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y *inbox.AgentInfo) int { return strings.Compare(x.Agent, y.Agent) })
	return out, nil
}

// Session marks (the agent hooks' per-session cursor): the key
// session.<sha256 of agent and session> of the store's bucket.

func sessionKey(agent, session string) string { return "session." + inbox.SessionKey(agent, session) }

// SessionMark returns the mark last recorded for agent's session.
func (b *Bus) SessionMark(ctx context.Context, agent, session string) (string, error) {
	if err := inbox.CheckSession(agent, session); err != nil {
		return "", err
	}
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	e, err := b.kv.Get(rctx, sessionKey(agent, session))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", inbox.Storage(err, "read the session mark of %s", agent)
	}
	return string(e.Value()), nil
}

// SetSessionMark records mark for agent's session.
func (b *Bus) SetSessionMark(ctx context.Context, agent, session, mark string) error {
	if err := inbox.CheckSessionMark(agent, session, mark); err != nil {
		return err
	}
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	_, err := b.kv.Put(rctx, sessionKey(agent, session), []byte(mark))
	return inbox.Storage(err, "record the session mark of %s", agent)
}

// LockDaemon: one daemon per store on each machine (each serves its own
// intake directory; leases are expired by compare-and-set, so daemons on
// several machines never conflict). The lock is a file lock in the user's
// cache directory.
func (b *Bus) LockDaemon(ctx context.Context, holder string) (func(), error) {
	p, err := lockPath(b.server, b.name, os.Getenv)
	if err != nil {
		return nil, err
	}
	lk := flock.New(p)
	ok, err := lk.TryLock()
	if err != nil {
		return nil, inbox.Storage(err, "lock %s", p)
	}
	if !ok {
		other, _ := os.ReadFile(p)
		msg := "another inbox daemon is running on this store on this machine"
		if h := strings.TrimSpace(string(other)); h != "" {
			msg += " (" + h + ")"
		}
		return nil, &inbox.Error{Code: "daemon_running", Err: inbox.ErrLeaseConflict,
			Rule: msg + "; stop it first, or give this one another {db}"}
	}
	os.WriteFile(p, []byte(holder+"\n"), 0o600)
	return func() { lk.Unlock() }, nil
}

// DaemonLockPath is the file a daemon of the store db locks on this
// machine, for a process whose environment getenv reads: in the user's
// cache directory ($XDG_CACHE_HOME, else $HOME/.cache), or the temp
// directory when that cannot be made.
func DaemonLockPath(db string, getenv func(string) string) (string, error) {
	c, err := parseURL(db)
	if err != nil {
		return "", err
	}
	return lockPath(c.server, c.name, getenv)
}

func lockPath(server, name string, getenv func(string) string) (string, error) {
	sum := sha256.Sum256([]byte(server + "/" + name))
	file := "nats-" + hex.EncodeToString(sum[:8]) + ".daemon.lock"
	var dirs []string
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		dirs = append(dirs, filepath.Join(d, "inbox"))
	} else if h := getenv("HOME"); h != "" {
		dirs = append(dirs, filepath.Join(h, ".cache", "inbox"))
	}
	tmp := getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	dirs = append(dirs, filepath.Join(tmp, fmt.Sprintf("inbox-%d", os.Getuid())))
	var last error
	for _, d := range dirs {
		if last = os.MkdirAll(d, 0o700); last == nil {
			return filepath.Join(d, file), nil
		}
	}
	return "", inbox.Storage(last, "create a directory for the daemon's lock")
}

// actor is the agent an event shows acting ("" for none): who caused it,
// except a lease's expiry and a task's creation, which its owner did
// (record.By).
func actor(r *record) string {
	if r.By != "" {
		return r.By
	}
	if r.Event.EventType == inbox.EventLeaseExpired {
		return ""
	}
	return r.Event.Agent
}

// seen records that agent looked at the store (collected mail, waited),
// which events do not show: the key seen.<agent>.
func (b *Bus) seen(ctx context.Context, agent string) {
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	b.kv.Put(rctx, "seen."+key(agent), []byte(inbox.FormatTime(b.now())))
}
