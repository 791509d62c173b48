package natsbus

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Teams (SPEC §10). A team's changes are events on
// inbox.NAME.ev.team.<name>, each carrying the whole team; a change is a
// publish with that subject's expected last sequence, as for a thread.

func (b *Bus) teamSubject(name string) string { return b.prefix + "team." + token(name) }

// team reads a team and the sequence of its last change (nil, 0: none).
func (b *Bus) team(ctx context.Context, name string) (*inbox.Team, uint64, error) {
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	m, err := b.stream.GetLastMsgForSubject(rctx, b.teamSubject(name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, inbox.Storage(err, "read team %s", name)
	}
	r, err := decode(m.Data, m.Sequence)
	if err != nil || r.Team == nil {
		return nil, 0, inbox.Corrupt(err, "event %d is not a team", m.Sequence)
	}
	return r.Team, m.Sequence, nil
}

// Team returns a team.
func (b *Bus) Team(ctx context.Context, name string) (*inbox.Team, error) {
	if err := inbox.ValidateTeam("team", name); err != nil {
		return nil, err
	}
	t, _, err := b.team(ctx, name)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, inbox.NoTeam(ctx, teamDir{b}, "team", name)
	}
	return t, nil
}

// teamDir is the bus as the rules of package inbox see its teams.
type teamDir struct{ b *Bus }

var _ inbox.Directory = teamDir{}

func (d teamDir) FindTeam(ctx context.Context, name string) (*inbox.Team, error) {
	t, _, err := d.b.team(ctx, name)
	return t, err
}

func (d teamDir) TeamNames(ctx context.Context) ([]string, error) {
	teams, err := d.b.Teams(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range teams {
		names = append(names, t.Name)
	}
	return names, nil
}

func (d teamDir) Teams(ctx context.Context) ([]*inbox.Team, error) { return d.b.Teams(ctx) }

// Teams lists every team, by name.
func (b *Bus) Teams(ctx context.Context) ([]*inbox.Team, error) {
	out := []*inbox.Team{}
	err := b.records(ctx, b.prefix+"team.*", 1, true, func(r *record, _ uint64) bool {
		if r.Team != nil {
			out = append(out, r.Team)
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// changeTeam decides a change of the team (inbox.TeamChange) from its
// current state and publishes it under the team subject's compare-and-set,
// deciding again when another change got in first.
func (b *Bus) changeTeam(ctx context.Context, by, name string, members []string, evType string) (*inbox.Team, error) {
	c, err := inbox.PrepareTeamChange(by, name, members, evType)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, seq, err := b.team(ctx, name)
		if err != nil {
			return nil, err
		}
		now := inbox.FormatTime(b.now())
		t, changed, err := c.Apply(ctx, teamDir{b}, cur, now)
		if err != nil {
			return nil, err
		}
		if cur != nil && len(changed) == 0 {
			return cur, nil
		}
		payload, _ := json.Marshal(struct {
			Team    string   `json:"team"`
			Members []string `json:"members"`
		}{name, changed})
		r := &record{Team: t, Event: inbox.Event{Source: b.source, EventType: evType, Agent: by, Summary: c.Summary(changed),
			PayloadJSON: payload, CreatedAt: now}}
		data, _ := json.Marshal(r)
		rctx, cancel := b.ctx(ctx)
		_, err = b.js.Publish(rctx, b.teamSubject(name), data, jetstream.WithExpectLastSequencePerSubject(seq))
		cancel()
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) && attempt < 100 {
			continue
		}
		if err != nil {
			return nil, inbox.Storage(err, "change team %s", name)
		}
		return t, nil
	}
}

// resolve expands an address into the agents a message goes to
// (inbox.Resolve over the bus's teams).
func (b *Bus) resolve(ctx context.Context, from string, a inbox.Address) ([]string, error) {
	return inbox.Resolve(ctx, teamDir{b}, from, a)
}
