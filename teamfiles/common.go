package teamfiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
)

// Config configures a bridge.
type Config struct {
	Bus inbox.Bus
	// Dir is the team directory: seed 002's DIR/{team}/members/{member}/
	// (JSONL), or Claude Code's DIR/{team}/config.json and inboxes/ (Claude).
	Dir string
	Log *slog.Logger
	// Agent is the Claude bridge's own member name (default "inbox").
	Agent string
	// MaxSize is the size past which a JSONL inbox is rotated (default 10 MiB).
	MaxSize int64
	// Sweep is how often the files are looked at without a notification
	// (default 1 s): the safety net under fsnotify.
	Sweep time.Duration
	// ForcePoll skips fsnotify (tests, file systems without notifications).
	ForcePoll bool
	// Ready, when set, is closed once the bridge has caught up at start.
	Ready chan<- struct{}

	// step, when set (tests), is called by the bridge's loop after each
	// thing it handled, with how far it has got: a check that something
	// did not happen waits for a later step instead of a while.
	step func(progress)
}

func (c *Config) defaults() {
	if c.Agent == "" {
		c.Agent = "inbox"
	}
	if c.MaxSize <= 0 {
		c.MaxSize = 10 << 20
	}
	if c.Sweep <= 0 {
		c.Sweep = time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// recipients is who a message went to.
func recipients(m *inbox.Message) []string {
	if len(m.Recipients) > 0 {
		return m.Recipients
	}
	return []string{m.ToAgent}
}

// routes reports whether m belongs in team t's file for member: m was
// delivered to member, a member of t, and addressed to @t, to "all" by a
// member of t, or to member by name by another member of t.
func routes(m *inbox.Message, t *inbox.Team, member string) bool {
	if !slices.Contains(t.Members, member) || !slices.Contains(recipients(m), member) || m.FromAgent == member {
		return false
	}
	a, err := inbox.ParseAddress("to", m.ToAgent)
	if err != nil {
		return false
	}
	if slices.Contains(a.Teams, t.Name) {
		return true
	}
	senderIn := slices.Contains(t.Members, m.FromAgent)
	return senderIn && (a.All || slices.Contains(a.Agents, member))
}

// messageOf returns the message an event added (nil if it added none or
// it cannot be read), and the origin of its thread when it is the
// thread's first message.
func messageOf(ctx context.Context, bus inbox.Bus, ev *inbox.Event) (*inbox.Message, *inbox.Origin) {
	if ev.MessageID == "" || ev.ThreadID == "" {
		return nil, nil
	}
	_, last, err := bus.LastMessage(ctx, ev.ThreadID)
	if err == nil && last != nil && last.MessageID == ev.MessageID && last.Seq > 1 {
		return last, nil
	}
	v, err := bus.Show(ctx, ev.ThreadID)
	if err != nil {
		return nil, nil
	}
	for _, m := range v.Messages {
		if m.MessageID == ev.MessageID {
			if m.Seq == 1 {
				return m, v.Origin
			}
			return m, nil
		}
	}
	return nil, nil
}

// teamCache is the teams as of the last event the bridge has handled:
// rebuilt from the team events of the log, so that a message goes to the
// files of the members its team had when it was sent, whenever the bridge
// gets to it. It belongs to one goroutine (the bridge's loop, or fsck's).
type teamCache struct {
	bus   inbox.Bus
	teams map[string]*inbox.Team
}

// load replays the team events up to event upTo.
func (c *teamCache) load(ctx context.Context, upTo int64) error {
	c.teams = map[string]*inbox.Team{}
	return c.bus.Events(ctx, 0, func(ev *inbox.Event) bool {
		if ev.EventID > upTo {
			return false
		}
		c.apply(ev)
		return true
	})
}

// apply updates the teams for a team event.
func (c *teamCache) apply(ev *inbox.Event) {
	if !isTeamEvent(ev) {
		return
	}
	var p struct {
		Team    string   `json:"team"`
		Members []string `json:"members"`
	}
	if json.Unmarshal(ev.PayloadJSON, &p) != nil || p.Team == "" {
		return
	}
	if c.teams == nil {
		c.teams = map[string]*inbox.Team{}
	}
	t := c.teams[p.Team]
	switch ev.EventType {
	case inbox.EventTeamCreated:
		c.teams[p.Team] = &inbox.Team{Name: p.Team, Members: slices.Clone(p.Members)}
	case inbox.EventTeamMembersAdded:
		if t != nil {
			for _, m := range p.Members {
				if !slices.Contains(t.Members, m) {
					t.Members = append(slices.Clip(t.Members), m)
				}
			}
		}
	case inbox.EventTeamMembersRemoved:
		if t != nil {
			t.Members = slices.DeleteFunc(slices.Clone(t.Members), func(m string) bool { return slices.Contains(p.Members, m) })
		}
	}
}

// get returns a copy of the teams, sorted by name.
func (c *teamCache) get() []*inbox.Team {
	out := make([]*inbox.Team, 0, len(c.teams))
	for _, t := range c.teams {
		cp := *t
		cp.Members = slices.Clone(t.Members)
		out = append(out, &cp)
	}
	slices.SortFunc(out, func(a, b *inbox.Team) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func isTeamEvent(ev *inbox.Event) bool {
	switch ev.EventType {
	case inbox.EventTeamCreated, inbox.EventTeamMembersAdded, inbox.EventTeamMembersRemoved:
		return true
	}
	return false
}

// key derives an idempotency key (at most 200 bytes) from its parts.
func key(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "teamfile/" + kind + "/" + hex.EncodeToString(h.Sum(nil))
}

// readJSON reads a JSON file into v; a missing file leaves v as it is.
// Anything but a regular file at p is refused (safe.go).
func readJSON(p string, v any) error {
	data, err := readFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// writeJSON writes v to p whole (temp file and rename) in its directory,
// which must exist; anything but a regular file at p is refused, not
// replaced.
func writeJSON(p string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := regularOrMissing(p); err != nil {
		return err
	}
	return renameio.WriteFile(p, append(data, '\n'), 0o600)
}
