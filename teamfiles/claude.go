package teamfiles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
)

// Claude Code's team files (SPEC §11 --claude-teams):
//
//	DIR/{team}/config.json             {"name", "members":[{"name", "agentId", …}], …}
//	DIR/{team}/inboxes/{agent}.json    [{"from","text","summary","timestamp","read","color"}, …]
//	DIR/{team}/inboxes/{agent}.json.lock   the mkdir lock around every change (stale after 10 s)
//	DIR/.inbox-bridge/claude.json      the bridge's state
//	DIR/.inbox-bridge/errors.log       entries that could not be taken in
//
// The bridge is a member of each team under its own name (Config.Agent):
// teammates write to it in inboxes/{agent}.json, and it writes into the
// other members' inboxes what the bus delivers to them.

// claudeEntry is one message of a Claude Code inbox file. Fields the
// bridge does not know are kept as they are.
type claudeEntry struct {
	From      string `json:"from"`
	Text      string `json:"text"`
	Summary   string `json:"summary,omitempty"`
	Timestamp string `json:"timestamp"`
	Read      bool   `json:"read"`
	Color     string `json:"color,omitempty"`
	rest      map[string]json.RawMessage
}

func (e *claudeEntry) UnmarshalJSON(b []byte) error {
	type plain claudeEntry
	if err := json.Unmarshal(b, (*plain)(e)); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range []string{"from", "text", "summary", "timestamp", "read", "color"} {
		delete(all, k)
	}
	if len(all) > 0 {
		e.rest = all
	}
	return nil
}

func (e claudeEntry) MarshalJSON() ([]byte, error) {
	type plain claudeEntry
	b, err := json.Marshal(plain(e))
	if err != nil || len(e.rest) == 0 {
		return b, err
	}
	extra, err := json.Marshal(e.rest)
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], ','), extra[1:]...), nil
}

func (e *claudeEntry) same(o *claudeEntry) bool {
	return e.From == o.From && e.Timestamp == o.Timestamp && e.Text == o.Text
}

// claudeState is DIR/.inbox-bridge/claude.json.
type claudeState struct {
	OutEvent int64 `json:"out_event"`
}

// Claude Code's lock: a directory made beside the file, retried with
// back-off (5 ms doubling to 100 ms, about a second in all), taken over
// when older than 10 s.
const (
	lockStale   = 10 * time.Second
	lockRetries = 14
)

var errLocked = errors.New("locked by another writer")

// lockFile takes Claude Code's lock on file p; unlock removes it.
func lockFile(p string) (unlock func(), err error) {
	lk := p + ".lock"
	wait := 5 * time.Millisecond
	for try := 0; ; try++ {
		err := os.Mkdir(lk, 0o700)
		if err == nil {
			return func() { os.Remove(lk) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, serr := os.Lstat(lk); serr == nil && time.Since(fi.ModTime()) > lockStale {
			// Stale: its holder died. Take it over (as proper-lockfile does).
			os.Remove(lk)
			continue
		}
		if try == lockRetries {
			return nil, fmt.Errorf("%s: %w", lk, errLocked)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// ensureInbox creates an inbox file as Claude Code does: [] exclusively,
// in its directory, which must exist. Anything but a regular file already
// at p is refused.
func ensureInbox(p string) error {
	f, err := openFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return regularOrMissing(p)
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString("[]")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readEntries reads an inbox file; a missing one has no entries, and
// anything but a regular file is refused.
func readEntries(p string) ([]*claudeEntry, error) {
	data, err := readFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var es []*claudeEntry
	if err := json.Unmarshal(data, &es); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return es, nil
}

// writeEntries replaces an inbox file whole (temp file and rename);
// anything but a regular file at p is refused, not replaced.
func writeEntries(p string, es []*claudeEntry) error {
	if es == nil {
		es = []*claudeEntry{}
	}
	data, err := json.MarshalIndent(es, "", "  ")
	if err != nil {
		return err
	}
	if err := regularOrMissing(p); err != nil {
		return err
	}
	return renameio.WriteFile(p, data, 0o600)
}

type claudeBridge struct {
	cfg    Config
	teams  teamCache
	notify *notifier

	mu    sync.Mutex // guards state and pending
	state claudeState
	dirty bool
	// pending holds the entries outbound has not written yet, per
	// "team/member", up to event pendingLast: written together, one lock
	// and one rewrite per file, by flush.
	pending     map[string][]*claudeEntry
	pendingN    int
	pendingLast int64

	refused refusals // planted files already logged
}

// RunClaude keeps Claude Code's team inboxes under cfg.Dir in step with
// the bus until ctx ends.
func RunClaude(ctx context.Context, cfg Config) error {
	cfg.defaults()
	if err := inbox.ValidateAgent("agent", cfg.Agent); err != nil {
		return err
	}
	b := &claudeBridge{cfg: cfg, teams: teamCache{bus: cfg.Bus}}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return err
	}
	if _, err := dirAt(true, cfg.Dir, stateDir); err != nil {
		return fmt.Errorf("claude teams: %w", err)
	}
	if err := readJSON(b.statePath(), &b.state); err != nil {
		return fmt.Errorf("claude teams: read %s: %w", b.statePath(), err)
	}
	b.notify = newNotifier(cfg.ForcePoll)
	defer b.notify.stop()
	b.notify.watch(cfg.Dir)
	b.discover()
	if err := b.teams.load(b.state.OutEvent); err != nil {
		return err
	}
	b.ingestAll()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	caughtUp := make(chan struct{})
	go func() {
		last, err := cfg.Bus.LastEventID()
		if err != nil {
			errc <- err
			return
		}
		if b.state.OutEvent >= last {
			close(caughtUp)
		}
		errc <- follow(ctx, cfg.Bus, b.state.OutEvent, cfg.ForcePoll, func(ev *inbox.Event) bool {
			b.outbound(ev)
			if ev.EventID == last {
				close(caughtUp)
			}
			return true
		})
	}()
	select {
	case <-caughtUp:
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	}
	b.flush()
	b.save()
	if cfg.Ready != nil {
		close(cfg.Ready)
	}
	tick := time.NewTicker(cfg.Sweep)
	defer tick.Stop()
	flush := time.NewTicker(100 * time.Millisecond)
	defer flush.Stop()
	write := time.NewTicker(10 * time.Millisecond)
	defer write.Stop()
	for {
		select {
		case <-write.C:
			b.flush()
		case <-ctx.Done():
			b.flush()
			b.save()
			return nil
		case err := <-errc:
			b.save()
			return err
		case dir := <-b.notify.C:
			if dir == b.cfg.Dir {
				b.discover()
				continue
			}
			if filepath.Base(dir) == "inboxes" {
				b.ingestTeam(filepath.Base(filepath.Dir(dir)))
			}
		case <-tick.C:
			b.discover()
			b.ingestAll()
		case <-flush.C:
			b.save()
		}
	}
}

func (b *claudeBridge) statePath() string { return filepath.Join(b.cfg.Dir, stateDir, "claude.json") }

func (b *claudeBridge) save() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.dirty {
		return
	}
	if err := writeJSON(b.statePath(), &b.state); err != nil {
		b.cfg.Log.Warn("claude teams: save state", "error", err)
		return
	}
	b.dirty = false
}

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

// discover makes each Claude Code team an inbox team with its members,
// adds the bridge to each team's config.json, and makes and watches the
// bridge's own inbox file.
func (b *claudeBridge) discover() {
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
		if t, err := b.cfg.Bus.Team(team); errors.Is(err, inbox.ErrNotFound) {
			if _, err := b.cfg.Bus.CreateTeam(b.cfg.Agent, team, others); err != nil && !errors.Is(err, inbox.ErrConflict) {
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
				if _, err := b.cfg.Bus.AddMembers(b.cfg.Agent, team, missing); err != nil {
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

// join adds the bridge to a team's config.json members, under its lock.
func (b *claudeBridge) join(team string) error {
	p := filepath.Join(b.cfg.Dir, team, "config.json")
	unlock, err := lockFile(p)
	if err != nil {
		return err
	}
	defer unlock()
	var cfg map[string]any
	if err := readJSON(p, &cfg); err != nil {
		return err
	}
	members, _ := cfg["members"].([]any)
	for _, m := range members {
		if mm, ok := m.(map[string]any); ok && mm["name"] == b.cfg.Agent {
			return nil
		}
	}
	cfg["members"] = append(members, map[string]any{
		"agentId": b.cfg.Agent + "@" + team, "name": b.cfg.Agent, "agentType": "inbox-bridge",
		"joinedAt": time.Now().UnixMilli(), "backendType": "external",
	})
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return renameio.WriteFile(p, data, 0o600)
}

func (b *claudeBridge) ingestAll() {
	for _, team := range b.claudeTeams() {
		b.ingestTeam(team)
	}
}

func claudeOrigin(team, agent string) string { return "teamfile:claude:" + team + "/" + agent }

// ingestTeam takes in the unread entries of the bridge's own inbox in a
// team, then marks them read under the lock.
func (b *claudeBridge) ingestTeam(team string) {
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
		ins, batch = append(ins, in), append(batch, e)
	}
	if len(ins) > 0 {
		_, errs, err := b.cfg.Bus.SendBatch(ins)
		if err != nil {
			b.cfg.Log.Warn("claude teams: take in", "team", team, "error", err)
			ins, batch = nil, nil // retried at the next look
		}
		for i, e := range batch {
			if errs[i] != nil {
				b.logError(team, e, errs[i])
			}
			done = append(done, e)
		}
	}
	if len(done) == 0 {
		return
	}
	unlock, err := lockFile(p)
	if err != nil {
		return // marked read next time; the store has them once either way
	}
	defer unlock()
	cur, err := readEntries(p)
	if err != nil {
		return
	}
	changed := false
	for _, e := range cur {
		for _, d := range done {
			if !e.Read && e.same(d) {
				e.Read, changed = true, true
			}
		}
	}
	if changed {
		if err := writeEntries(p, cur); err != nil {
			b.cfg.Log.Warn("claude teams: mark read", "team", team, "error", err)
		}
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
			c = inbox.Content{Type: typ, PayloadJSON: strings.TrimSpace(e.Text), Summary: e.Summary}
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

// ingestEntry sends one entry into the store.
func (b *claudeBridge) ingestEntry(team string, e *claudeEntry) error {
	in, err := b.entryInput(team, e)
	if err != nil {
		return err
	}
	_, err = b.cfg.Bus.Send(in)
	return err
}

func (b *claudeBridge) logError(team string, e *claudeEntry, err error) {
	b.cfg.Log.Warn("claude teams: an entry was not taken in", "team", team, "from", e.From, "error", err)
	p := filepath.Join(b.cfg.Dir, stateDir, "errors.log")
	f, ferr := openFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if ferr != nil {
		b.refused.report(b.cfg.Log, "claude teams: errors.log", ferr)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s team %s, entry from %q at %s: %v: %s\n", time.Now().UTC().Format(time.RFC3339), team, e.From, e.Timestamp, err,
		inbox.Shorten(e.Text, 500))
}

// entryOf is m as an entry of a Claude Code inbox: a typed message (other
// than seed 002's plain "message") as protocol JSON in the text.
func entryOf(m *inbox.Message) *claudeEntry {
	e := &claudeEntry{From: m.FromAgent, Summary: m.Summary, Timestamp: m.Timestamp}
	if e.Timestamp == "" {
		e.Timestamp = m.CreatedAt
	}
	switch {
	case m.Type != "" && m.Type != inbox.TypeMessage:
		obj := map[string]any{}
		json.Unmarshal(m.PayloadJSON, &obj)
		if obj == nil {
			obj = map[string]any{}
		}
		obj["type"] = m.Type
		if _, ok := obj["requestId"]; !ok && m.RequestID != "" {
			obj["requestId"] = m.RequestID
		}
		data, _ := json.Marshal(obj)
		e.Text = string(data)
	case m.Body != "":
		e.Text = m.Body
	default:
		var c struct {
			Text string `json:"text"`
		}
		json.Unmarshal(m.PayloadJSON, &c)
		e.Text = c.Text
		if e.Text == "" {
			e.Text = m.Summary
		}
	}
	return e
}

// outbound queues the message ev added for each Claude Code member's
// inbox it belongs in; flush writes the queue.
func (b *claudeBridge) outbound(ev *inbox.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pendingLast = ev.EventID
	defer func() {
		if b.pendingN >= 200 {
			b.flushLocked()
		} else if b.pendingN == 0 {
			b.state.OutEvent, b.dirty = ev.EventID, true
		}
	}()
	if isTeamEvent(ev) {
		b.teams.apply(ev)
		return
	}
	m, origin := messageOf(b.cfg.Bus, ev)
	if m == nil {
		return
	}
	claude := b.claudeTeams()
	for _, t := range b.teams.get() {
		if !slices.Contains(claude, t.Name) {
			continue
		}
		members, err := b.configMembers(t.Name)
		if err != nil {
			continue
		}
		for _, member := range members {
			if member == b.cfg.Agent || !routes(m, t, member) || origin != nil && origin.Descriptor == claudeOrigin(t.Name, member) {
				continue
			}
			if b.pending == nil {
				b.pending = map[string][]*claudeEntry{}
			}
			k := t.Name + "/" + member
			b.pending[k] = append(b.pending[k], entryOf(m))
			b.pendingN++
		}
	}
}

func (b *claudeBridge) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

// flushLocked writes the queued entries; once none is left, the state
// records that everything up to pendingLast is written.
func (b *claudeBridge) flushLocked() {
	for k, es := range b.pending {
		team, member, _ := strings.Cut(k, "/")
		if err := b.deliver(team, member, es...); err != nil {
			b.refused.report(b.cfg.Log, "claude teams: deliver", err, "team", team, "member", member, "entries", len(es))
			if !errors.Is(err, errUnsafe) {
				continue // retried at the next flush
			}
			// A planted file is skipped, not retried for ever: fsck
			// --repair writes what it missed once it is sound again.
		}
		delete(b.pending, k)
		b.pendingN -= len(es)
	}
	if b.pendingN == 0 {
		b.state.OutEvent, b.dirty = b.pendingLast, true
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
		var unlock func()
		if unlock, err = lockFile(p); err == nil {
			err = func() error {
				defer unlock()
				es, err := readEntries(p)
				if err != nil {
					return err
				}
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
				if len(es) == n {
					return nil
				}
				return writeEntries(p, es)
			}()
			return err
		}
		if !errors.Is(err, errLocked) {
			return err
		}
	}
	return err
}
