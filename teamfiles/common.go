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
	// index finds the requests and acknowledged messages that lines
	// taken in answer (requests.go); newBase gives each bridge its own,
	// persisted beside its state.
	index *requestIndex
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
	if c.index == nil {
		c.index = newRequestIndex(c.Bus, "", "")
	}
}

// Seed 002's protocol through the files (SPEC §11): a message taken in
// from a file is a reply in the thread of the request it answers, or the
// acknowledgment of the message it names, or else a message of its own
// (a new thread). takeIn decides and does it; both bridges take in every
// message through it.

// route is where a message taken in goes.
type route struct {
	// thread, for a response, is the request's thread; ackID, for an
	// acknowledgment, what it names. Neither: a new thread.
	thread string
	ackID  string
}

// routeOf decides where in goes. A response is a message with a request
// id that an earlier request of someone else carries; an acknowledgment
// one of type acknowledgment whose content names an ackId.
func routeOf(ctx context.Context, cfg Config, in inbox.SendInput) (route, error) {
	if in.ThreadID != "" {
		return route{thread: in.ThreadID}, nil
	}
	if in.Type == inbox.TypeAcknowledgment {
		if id := inbox.AckedID(&inbox.Message{Type: in.Type, PayloadJSON: json.RawMessage(in.PayloadJSON)}); id != "" {
			return route{ackID: id}, nil
		}
	}
	if in.RequestID != "" {
		r, ok, err := cfg.index.request(ctx, in.RequestID)
		if err != nil {
			return route{}, err
		}
		// The request's own sender repeating its id asks again: that is
		// no response (and the line that made the request, read again,
		// finds itself).
		if ok && r.From != in.From {
			return route{thread: r.Thread}, nil
		}
	}
	return route{}, nil
}

// plain reports whether the route is a new thread.
func (r route) plain() bool { return r.thread == "" && r.ackID == "" }

// takeIn takes in message in, read from a team file: as a reply in the
// thread of the request it answers (so wait-reply --request-id wakes on
// it), as the acknowledgment of the message it names (inbox ack), or
// else as a new thread. in's idempotency key makes it exactly once in
// every case. A response to a thread that has ended, or an
// acknowledgment nobody asked of its sender, is a new thread.
func takeIn(ctx context.Context, cfg Config, in inbox.SendInput) (*inbox.Result, error) {
	cfg.defaults()
	r, err := routeOf(ctx, cfg, in)
	if err != nil {
		return nil, err
	}
	return takeInBy(ctx, cfg, r, in)
}

func takeInBy(ctx context.Context, cfg Config, r route, in inbox.SendInput) (*inbox.Result, error) {
	switch {
	case r.ackID != "":
		res, err := cfg.Bus.Ack(ctx, in.From, r.ackID, "", in.Content)
		if errors.Is(err, inbox.ErrNotFound) {
			// Not owed (any more): acknowledged already, by this line
			// before a restart or by inbox ack, which the message's
			// thread says.
			var ref ackRef
			var ok bool
			if ref, ok, err = cfg.index.acked(ctx, r.ackID); err != nil {
				return nil, err
			}
			if ok {
				res, err = cfg.Bus.Ack(ctx, in.From, ref.Message, ref.Thread, in.Content)
			} else {
				err = inbox.NotFound("no message asks for acknowledgment %s", r.ackID)
			}
		}
		if !errors.Is(err, inbox.ErrNotFound) && !errors.Is(err, inbox.ErrInvalidState) {
			return res, err
		}
		cfg.Log.Info("team files: an acknowledgment settles nothing; taken in as a message", "from", in.From, "ack_id", r.ackID, "why", err)
	case r.thread != "":
		res, err := cfg.Bus.Reply(ctx, in.From, in.To, r.thread, "", in.Content)
		if !errors.Is(err, inbox.ErrInvalidState) {
			return res, err
		}
		cfg.Log.Info("team files: a response to an ended thread; taken in as a message", "from", in.From, "thread", r.thread, "why", err)
	}
	return cfg.Bus.Send(ctx, in)
}

// takeInAll is takeIn for several messages in order, sending the new
// threads among them in batches (one commit of the store each): errs[i]
// refuses ins[i] alone; err fails what was not done yet (the caller
// tries again; what was done is replayed).
func takeInAll(ctx context.Context, cfg Config, ins []inbox.SendInput) (results []*inbox.Result, errs []error, err error) {
	cfg.defaults()
	results, errs = make([]*inbox.Result, len(ins)), make([]error, len(ins))
	var batch []int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		part := make([]inbox.SendInput, len(batch))
		for j, i := range batch {
			part[j] = ins[i]
		}
		rs, es, err := cfg.Bus.SendBatch(ctx, part)
		if err != nil {
			return err
		}
		for j, i := range batch {
			results[i], errs[i] = rs[j], es[j]
		}
		batch = batch[:0]
		return nil
	}
	for i, in := range ins {
		r, err := routeOf(ctx, cfg, in)
		if err != nil {
			return nil, nil, err
		}
		if r.plain() {
			batch = append(batch, i)
			continue
		}
		if err := flush(); err != nil {
			return nil, nil, err
		}
		results[i], errs[i] = takeInBy(ctx, cfg, r, in)
		if errs[i] != nil && !refusal(errs[i]) {
			return nil, nil, errs[i]
		}
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return results, errs, nil
}

// refusal reports whether err refuses a message for what it says (it will
// be refused again), not for a failure that a retry may get past.
func refusal(err error) bool {
	return errors.Is(err, inbox.ErrInvalidInput) || errors.Is(err, inbox.ErrInvalidState) || errors.Is(err, inbox.ErrNotFound)
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
