package teamfiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonedit"
)

// The bridge for Claude Code's team files (claude_format.go has the
// format) is a member of each team under its own name (Config.Agent):
// teammates write to it in inboxes/{agent}.json, and it writes into the
// other members' inboxes what the bus delivers to them.

// claudeState is DIR/.inbox-bridge/claude.json.
type claudeState struct {
	// OutEvent is the last event whose messages are in the files.
	OutEvent int64 `json:"out_event"`
	// Written is, per "team/member", the last event whose message the
	// bridge wrote to that member's inbox. A message up to it that is not
	// in the file was removed by someone (an archive or clean-up recipe):
	// theirs to remove, never written back.
	Written map[string]int64 `json:"written,omitempty"`
	// Unwritten lists, per "team/member", the messages (by id) the bridge
	// could not write because the file was unsafe: fsck --repair writes
	// them once it is sound.
	Unwritten map[string][]string `json:"unwritten,omitempty"`
}

// wrote reports whether the bridge wrote the message id of event ev to
// the inbox file k ("team/member").
func (st *claudeState) wrote(k string, ev int64, id string) bool {
	return ev <= st.Written[k] && !slices.Contains(st.Unwritten[k], id)
}

// delivery is a message to write to an inbox file, and its event.
type delivery struct {
	m     *inbox.Message
	event int64
}

// claudeBridge is the bridge's state, owned by its loop (bridge.go).
type claudeBridge struct {
	base
	state claudeState
	// pending holds the messages outbound has not written yet, per
	// "team/member", up to event pendingLast: written together, one lock
	// and one rewrite per file, by flush.
	pending     map[string][]delivery
	pendingN    int
	pendingLast int64
}

var _ side = (*claudeBridge)(nil)

func newClaude(cfg Config) *claudeBridge {
	return &claudeBridge{base: newBase(cfg, "claude teams", "claude.json")}
}

// RunClaude keeps Claude Code's team inboxes under cfg.Dir in step with
// the bus until ctx ends.
func RunClaude(ctx context.Context, cfg Config) error {
	b := newClaude(cfg)
	if err := inbox.ValidateAgent("agent", b.cfg.Agent); err != nil {
		return err
	}
	if err := b.open(&b.state); err != nil {
		return err
	}
	// Entries are written every 10 ms: a burst of events becomes one
	// rewrite of each file.
	b.writeEvery = 10 * time.Millisecond
	return b.run(ctx, b)
}

func (b *claudeBridge) start(ctx context.Context) error {
	b.notify.watch(b.cfg.Dir)
	b.discover(ctx)
	b.ingestAll(ctx)
	return nil
}

func (b *claudeBridge) outEvent() int64 { return b.state.OutEvent }

func (b *claudeBridge) changed(ctx context.Context, dir string) {
	if dir == b.cfg.Dir {
		b.discover(ctx)
		return
	}
	if filepath.Base(dir) == "inboxes" {
		b.ingestTeam(ctx, filepath.Base(filepath.Dir(dir)))
	}
}

func (b *claudeBridge) sweep(ctx context.Context) {
	b.discover(ctx)
	b.ingestAll(ctx)
}

func (b *claudeBridge) save() { b.saveState(&b.state) }

func (b *claudeBridge) inboxPath(team, agent string) string {
	return filepath.Join(b.cfg.Dir, team, "inboxes", agent+".json")
}

// inboxFile is inboxPath after checking that the team's directory and its
// inboxes directory are directories (made when create is set and missing).
func (b *claudeBridge) inboxFile(team, agent string, create bool) (string, error) {
	dir, err := dirAt(create, b.cfg.Dir, team, "inboxes")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, agent+".json"), nil
}

// claudeTeams lists the teams under Dir (those with a config.json).
func (b *claudeBridge) claudeTeams() []string {
	entries, _ := os.ReadDir(b.cfg.Dir)
	var out []string
	for _, e := range entries {
		if e.IsDir() && inbox.ValidateTeam("team", e.Name()) == nil {
			if _, err := os.Lstat(filepath.Join(b.cfg.Dir, e.Name(), "config.json")); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// configMembers reads a team's config.json members.
func (b *claudeBridge) configMembers(team string) ([]string, error) {
	var cfg struct {
		Members []struct {
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := readJSON(filepath.Join(b.cfg.Dir, team, "config.json"), &cfg); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range cfg.Members {
		if inbox.ValidateAgent("member", m.Name) == nil {
			out = append(out, m.Name)
		}
	}
	return out, nil
}

// memberTeams maps each member of the Claude Code teams under Dir, but
// the bridge, to the teams whose config.json lists it, in name order.
func (b *claudeBridge) memberTeams() map[string][]string {
	out := map[string][]string{}
	for _, team := range b.claudeTeams() {
		members, err := b.configMembers(team)
		if err != nil {
			continue
		}
		for _, m := range members {
			if m != b.cfg.Agent && !slices.Contains(out[m], team) {
				out[m] = append(out[m], team)
			}
		}
	}
	return out
}

// claudeFiles returns the teams, of a member's Claude Code teams, in
// whose inbox file for member m belongs: none unless m was delivered to
// member by someone else; else those m was addressed to (@team) when it
// names some of them, or else all of them, whoever sent it and however
// it was addressed (SPEC §11).
func claudeFiles(m *inbox.Message, member string, teams []string) []string {
	if len(teams) == 0 || m.FromAgent == member || !slices.Contains(inbox.RecipientsOf(m), member) {
		return nil
	}
	if a, err := inbox.ParseAddress("to", m.ToAgent); err == nil {
		var named []string
		for _, t := range teams {
			if slices.Contains(a.Teams, t) {
				named = append(named, t)
			}
		}
		if len(named) > 0 {
			return named
		}
	}
	return teams
}

// discover makes each Claude Code team an inbox team with its members,
// adds the bridge to each team's config.json, and makes and watches the
// bridge's own inbox file.
func (b *claudeBridge) discover(ctx context.Context) {
	for _, team := range b.claudeTeams() {
		members, err := b.configMembers(team)
		if err != nil {
			b.refused.report(b.cfg.Log, "claude teams: read config.json", err, "team", team)
			continue
		}
		if !slices.Contains(members, b.cfg.Agent) {
			if err := b.join(team); err != nil {
				b.cfg.Log.Warn("claude teams: join", "team", team, "error", err)
			}
		}
		others := slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == b.cfg.Agent })
		if t, err := b.cfg.Bus.Team(ctx, team); errors.Is(err, inbox.ErrNotFound) {
			if _, err := b.cfg.Bus.CreateTeam(ctx, b.cfg.Agent, team, others); err != nil && !errors.Is(err, inbox.ErrConflict) {
				b.cfg.Log.Warn("claude teams: create team", "team", team, "error", err)
			}
		} else if err == nil {
			var missing []string
			for _, m := range others {
				if !slices.Contains(t.Members, m) {
					missing = append(missing, m)
				}
			}
			if len(missing) > 0 {
				if _, err := b.cfg.Bus.AddMembers(ctx, b.cfg.Agent, team, missing); err != nil {
					b.cfg.Log.Warn("claude teams: add members", "team", team, "error", err)
				}
			}
		}
		own, err := b.inboxFile(team, b.cfg.Agent, true)
		if err == nil {
			err = ensureInbox(own)
		}
		if err != nil {
			b.refused.report(b.cfg.Log, "claude teams: create the bridge's inbox", err, "team", team)
			continue
		}
		b.notify.watch(filepath.Dir(own))
	}
}

// claudeMember is the member the bridge adds to a team's config.json, its
// keys in the order Claude Code writes them.
type claudeMember struct {
	AgentID     string `json:"agentId"`
	Name        string `json:"name"`
	AgentType   string `json:"agentType"`
	JoinedAt    int64  `json:"joinedAt"`
	BackendType string `json:"backendType"`
}

// join adds the bridge to a team's config.json members, under its lock.
// Only the new member is written: the rest of the file (key order,
// spacing, numbers, members and fields the bridge does not know) and its
// mode stay as they were.
func (b *claudeBridge) join(team string) error {
	p := filepath.Join(b.cfg.Dir, team, "config.json")
	unlock, err := lockFile(p)
	if err != nil {
		return err
	}
	defer unlock()
	src, err := readFile(p)
	if err != nil {
		return err
	}
	doc, err := jsonedit.Parse(src)
	if err != nil || doc.Root.Kind != jsonedit.Object {
		return fmt.Errorf("%s: not a JSON object", p)
	}
	members := doc.Root.Get("members")
	if members != nil && members.Kind != jsonedit.Array {
		return fmt.Errorf("%s: members is not an array", p)
	}
	if members != nil {
		for _, m := range members.Elems {
			var mm struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(doc.Raw(m), &mm) == nil && mm.Name == b.cfg.Agent {
				return nil
			}
		}
	}
	me, err := json.MarshalIndent(claudeMember{AgentID: b.cfg.Agent + "@" + team, Name: b.cfg.Agent,
		AgentType: "inbox-bridge", JoinedAt: time.Now().UnixMilli(), BackendType: "external"}, "", doc.Unit)
	if err != nil {
		return err
	}
	if members != nil {
		doc.Append(members, string(me))
	} else {
		doc.Append(doc.Root, `"members": [`+"\n"+doc.Unit+strings.ReplaceAll(string(me), "\n", "\n"+doc.Unit)+"\n]")
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Lstat(p); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := regularOrMissing(p); err != nil {
		return err
	}
	return renameio.WriteFile(p, doc.Bytes(), mode)
}

func (b *claudeBridge) ingestAll(ctx context.Context) {
	for _, team := range b.claudeTeams() {
		b.ingestTeam(ctx, team)
	}
}

func claudeOrigin(team, agent string) string { return "teamfile:claude:" + team + "/" + agent }

// ingestTeam takes in the unread entries of the bridge's own inbox in a
// team, then marks them read under the lock.
func (b *claudeBridge) ingestTeam(ctx context.Context, team string) {
	p, err := b.inboxFile(team, b.cfg.Agent, false)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var es []*claudeEntry
	if err == nil {
		es, err = readEntries(p)
	}
	if err != nil {
		b.refused.report(b.cfg.Log, "claude teams: read the bridge's inbox", err, "team", team)
		return
	}
	var done, batch []*claudeEntry
	var ins []inbox.SendInput
	// sendBatch takes in the plain entries gathered so far in one batch;
	// false when the store could not be written (retried at the next look).
	sendBatch := func() bool {
		if len(ins) == 0 {
			return true
		}
		_, errs, err := b.cfg.Bus.SendBatch(ctx, ins)
		if err != nil {
			b.cfg.Log.Warn("claude teams: take in", "team", team, "error", err)
			return false
		}
		for i, e := range batch {
			if errs[i] != nil {
				b.logError(team, e, errs[i])
			}
			done = append(done, e)
		}
		ins, batch = nil, nil
		return true
	}
	for _, e := range es {
		if e.Read {
			continue
		}
		in, err := b.entryInput(team, e)
		if err != nil {
			b.logError(team, e, err)
			done = append(done, e)
			continue
		}
		if in.Content.Type == "" {
			ins, batch = append(ins, in), append(batch, e)
			continue
		}
		// A protocol message goes alone, in its place: it may answer a
		// request or acknowledge a message, and an idle notification
		// sets its sender's presence.
		if !sendBatch() {
			break
		}
		if err := b.takeIn(ctx, in); err != nil {
			if !refusal(err) {
				b.cfg.Log.Warn("claude teams: take in", "team", team, "error", err)
				break
			}
			b.logError(team, e, err)
		}
		done = append(done, e)
	}
	sendBatch()
	if len(done) == 0 {
		return
	}
	// Not locked or not read: marked read next time; the store has them
	// once either way. Only a failure to write is worth a warning.
	writing := false
	err = updateEntries(p, func(cur []*claudeEntry) ([]*claudeEntry, bool) {
		for _, e := range cur {
			for _, d := range done {
				if !e.Read && e.same(d) {
					e.Read, writing = true, true
				}
			}
		}
		return cur, writing
	})
	if err != nil && writing {
		b.cfg.Log.Warn("claude teams: mark read", "team", team, "error", err)
	}
}

// entryInput is the send one entry becomes: from its writer to the
// member its protocol JSON names ("to" or "recipient"), else to the
// bridge's agent; protocol JSON with a "type" becomes a typed message.
func (b *claudeBridge) entryInput(team string, e *claudeEntry) (inbox.SendInput, error) {
	if err := inbox.ValidateAgent("from", e.From); err != nil {
		return inbox.SendInput{}, err
	}
	to := b.cfg.Agent
	c := inbox.Content{Summary: e.Summary, Body: e.Text}
	var obj map[string]any
	if t := strings.TrimSpace(e.Text); strings.HasPrefix(t, "{") && json.Unmarshal([]byte(t), &obj) == nil {
		for _, k := range []string{"to", "recipient"} {
			if s, ok := obj[k].(string); ok && inbox.ValidateAgent("to", s) == nil {
				to = s
				break
			}
		}
		if typ, ok := obj["type"].(string); ok && inbox.ValidateType("type", typ) == nil {
			c = protocolContent(typ, strings.TrimSpace(e.Text), obj)
			if e.Summary != "" {
				c.Summary = e.Summary
			}
			if c.Summary == "" {
				c.Summary = typ + " from " + e.From
			}
		}
	}
	if c.Summary == "" && c.Body == "" {
		c.Summary = "(empty message from " + e.From + ")"
	}
	c.Timestamp = e.Timestamp
	c.IdempotencyKey = key("claude", team, e.From, e.Timestamp, e.Text)
	return inbox.SendInput{From: e.From, To: to, Content: c, Origin: &inbox.Origin{Descriptor: claudeOrigin(team, b.cfg.Agent)}}, nil
}

// protocolContent is the content of protocol JSON of type typ in an
// entry's text (obj decoded): Claude Code's own (its members at the top)
// is the payload whole; a seed-002 line (a "content" object) maps as seed
// 002 does, its content the payload. Either way "requestId" pairs it with
// a request and "ackId" names what an acknowledgment settles or, on
// another type, asks the recipient to acknowledge it.
func protocolContent(typ, text string, obj map[string]any) inbox.Content {
	c := inbox.Content{Type: typ, PayloadJSON: text}
	c.RequestID, _ = obj["requestId"].(string)
	ackID, _ := obj["ackId"].(string)
	if content, ok := obj["content"].(map[string]any); ok {
		raw, _ := json.Marshal(content)
		c.PayloadJSON, c.Summary = string(raw), inbox.ContentSummary(raw)
		if typ == inbox.TypeAcknowledgment {
			ackID = "" // the content names it
		}
	}
	if ackID != "" && typ != inbox.TypeAcknowledgment {
		c.AckID, c.AckRequired = ackID, true
	}
	return c
}

// ingestEntry sends one entry into the store.
func (b *claudeBridge) ingestEntry(ctx context.Context, team string, e *claudeEntry) error {
	in, err := b.entryInput(team, e)
	if err != nil {
		return err
	}
	return b.takeIn(ctx, in)
}

// takeIn takes one message in from a file: a response as a reply in its
// request's thread, an acknowledgment as the ack it settles, else a send
// (common.go's takeIn).
func (b *claudeBridge) takeIn(ctx context.Context, in inbox.SendInput) error {
	_, err := takeIn(ctx, b.cfg, in)
	return err
}

func (b *claudeBridge) logError(team string, e *claudeEntry, err error) {
	b.cfg.Log.Warn("claude teams: an entry was not taken in", "team", team, "from", e.From, "error", err)
	b.errorLog(filepath.Join(b.cfg.Dir, stateDir, "errors.log"),
		fmt.Sprintf("team %s, entry from %q at %s: %v: %s", team, e.From, e.Timestamp, err, inbox.Shorten(e.Text, 500)))
}

// outbound queues the message ev added for each Claude Code member's
// inbox it belongs in; flush writes the queue.
func (b *claudeBridge) outbound(ctx context.Context, ev *inbox.Event) {
	after := max(b.pendingLast, b.state.OutEvent)
	b.pendingLast = ev.EventID
	defer func() {
		if b.pendingN >= 200 {
			b.flush()
		} else if b.pendingN == 0 {
			b.state.OutEvent, b.dirty = ev.EventID, true
		}
	}()
	if isTeamEvent(ev) {
		b.cfg.index.note(after, ev, nil)
		return
	}
	m, origin := messageOf(ctx, b.cfg.Bus, ev)
	b.cfg.index.note(after, ev, m)
	if m == nil {
		return
	}
	where := b.memberTeams()
	for _, member := range inbox.RecipientsOf(m) {
		for _, team := range claudeFiles(m, member, where[member]) {
			if origin != nil && origin.Descriptor == claudeOrigin(team, member) {
				continue
			}
			if b.pending == nil {
				b.pending = map[string][]delivery{}
			}
			k := team + "/" + member
			b.pending[k] = append(b.pending[k], delivery{m, ev.EventID})
			b.pendingN++
		}
	}
}

// flush writes the queued entries, and records in the state what it
// wrote where (saved at once: what the state says was written and is not
// in a file was removed by someone); once none is left, the state records
// that everything up to pendingLast is written.
func (b *claudeBridge) flush() {
	wrote := false
	for k, ds := range b.pending {
		team, member, _ := strings.Cut(k, "/")
		es := make([]*claudeEntry, len(ds))
		for i, d := range ds {
			es[i] = entryOf(d.m)
		}
		if err := b.deliver(team, member, es...); err != nil {
			b.refused.report(b.cfg.Log, "claude teams: deliver", err, "team", team, "member", member, "entries", len(es))
			if !errors.Is(err, errUnsafe) {
				continue // retried at the next flush
			}
			// A planted file is skipped, not retried for ever: fsck
			// --repair writes what it missed once it is sound again.
			if b.state.Unwritten == nil {
				b.state.Unwritten = map[string][]string{}
			}
			for _, d := range ds {
				b.state.Unwritten[k] = append(b.state.Unwritten[k], d.m.MessageID)
			}
		} else {
			if b.state.Written == nil {
				b.state.Written = map[string]int64{}
			}
			b.state.Written[k] = ds[len(ds)-1].event
		}
		wrote, b.dirty = true, true
		delete(b.pending, k)
		b.pendingN -= len(ds)
	}
	if b.pendingN == 0 {
		b.state.OutEvent, b.dirty = b.pendingLast, true
	}
	if wrote {
		b.save()
	}
}

// deliver appends entries to a member's inbox with Claude Code's
// protocol: create [] exclusively, lock, re-read, append unread, temp file
// and rename. An entry already there (same sender, time and text) is not
// added again.
func (b *claudeBridge) deliver(team, member string, add ...*claudeEntry) error {
	p, err := b.inboxFile(team, member, true)
	if err != nil {
		return err
	}
	if err := ensureInbox(p); err != nil {
		return err
	}
	for try := 0; try < 50; try++ {
		err = updateEntries(p, func(es []*claudeEntry) ([]*claudeEntry, bool) {
			n := len(es)
		next:
			for _, e := range add {
				for _, x := range es {
					if x.same(e) {
						continue next
					}
				}
				e.Read = false
				es = append(es, e)
			}
			return es, len(es) > n
		})
		if !errors.Is(err, errLocked) {
			return err
		}
	}
	return err
}
