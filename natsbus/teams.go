package natsbus

import (
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Teams (SPEC §10). A team's changes are events on
// inbox.NAME.ev.team.<name>, each carrying the whole team; a change is a
// publish with that subject's expected last sequence, as for a thread.

func (b *Bus) teamSubject(name string) string { return b.prefix + "team." + token(name) }

// team reads a team and the sequence of its last change (nil, 0: none).
func (b *Bus) team(name string) (*inbox.Team, uint64, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	m, err := b.stream.GetLastMsgForSubject(ctx, b.teamSubject(name))
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
func (b *Bus) Team(name string) (*inbox.Team, error) {
	if err := inbox.ValidateTeam("team", name); err != nil {
		return nil, err
	}
	t, _, err := b.team(name)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, b.noTeam("team", name)
	}
	return t, nil
}

func (b *Bus) noTeam(field, name string) error {
	msg := "team " + name + " does not exist"
	if field == "to" {
		msg = "@" + name + " names no team"
	}
	var names []string
	if teams, err := b.Teams(); err == nil {
		for _, t := range teams {
			names = append(names, t.Name)
		}
	}
	if len(names) > 0 {
		msg += " (teams: " + strings.Join(names, ", ") + ")"
	} else {
		msg += " (create it with inbox team create)"
	}
	return inbox.Errorf(inbox.ErrNotFound, "team_not_found", field, "%s", msg)
}

// Teams lists every team, by name.
func (b *Bus) Teams() ([]*inbox.Team, error) {
	out := []*inbox.Team{}
	err := b.records(b.prefix+"team.*", 1, true, func(r *record, _ uint64) bool {
		if r.Team != nil {
			out = append(out, r.Team)
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func (b *Bus) teamsOf(agent string) ([]string, error) {
	teams, err := b.Teams()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range teams {
		if slices.Contains(t.Members, agent) {
			out = append(out, t.Name)
		}
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// CreateTeam creates a team; a team of that name must not exist.
func (b *Bus) CreateTeam(by, name string, members []string) (*inbox.Team, error) {
	return b.changeTeam(by, name, members, false, inbox.EventTeamCreated, func(t *inbox.Team, ms []string) ([]string, error) {
		if t.CreatedAt != "" {
			return nil, inbox.Errorf(inbox.ErrConflict, "team_exists", "team",
				"team %s already exists with members %s: add members with inbox team add", name, orNone(strings.Join(t.Members, ", ")))
		}
		t.Members = ms
		return ms, nil
	})
}

// AddMembers adds members to a team; those already in it stay as they are.
func (b *Bus) AddMembers(by, name string, members []string) (*inbox.Team, error) {
	return b.changeTeam(by, name, members, true, inbox.EventTeamMembersAdded, func(t *inbox.Team, ms []string) ([]string, error) {
		var added []string
		for _, m := range ms {
			if !slices.Contains(t.Members, m) {
				t.Members = append(t.Members, m)
				added = append(added, m)
			}
		}
		return added, nil
	})
}

// RemoveMembers removes members from a team; each must be a member.
func (b *Bus) RemoveMembers(by, name string, members []string) (*inbox.Team, error) {
	return b.changeTeam(by, name, members, true, inbox.EventTeamMembersRemoved, func(t *inbox.Team, ms []string) ([]string, error) {
		for _, m := range ms {
			if !slices.Contains(t.Members, m) {
				return nil, inbox.Errorf(inbox.ErrNotFound, "not_a_member", "member",
					"%s is not a member of team %s (members: %s)", m, name, orNone(strings.Join(t.Members, ", ")))
			}
		}
		t.Members = slices.DeleteFunc(t.Members, func(m string) bool { return slices.Contains(ms, m) })
		return ms, nil
	})
}

// changeTeam decides a change of the team from its current state and
// publishes it under the team subject's compare-and-set, deciding again
// when another change got in first.
func (b *Bus) changeTeam(by, name string, members []string, exist bool, evType string,
	change func(t *inbox.Team, members []string) ([]string, error)) (*inbox.Team, error) {
	if err := inbox.ValidateAgent("agent", by); err != nil {
		return nil, err
	}
	if err := inbox.ValidateTeam("team", name); err != nil {
		return nil, err
	}
	ms, err := inbox.ValidateMembers(members, exist)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		cur, seq, err := b.team(name)
		if err != nil {
			return nil, err
		}
		if exist && cur == nil {
			return nil, b.noTeam("team", name)
		}
		t := &inbox.Team{}
		if cur != nil {
			*t = *cur
			t.Members = slices.Clone(cur.Members)
		}
		changed, err := change(t, ms)
		if err != nil {
			return nil, err
		}
		if t.Members == nil {
			t.Members = []string{}
		}
		if cur != nil && len(changed) == 0 {
			return cur, nil
		}
		now := inbox.FormatTime(b.now())
		if t.CreatedAt == "" {
			t.Name, t.CreatedBy, t.CreatedAt = name, by, now
		}
		t.UpdatedAt = now
		summary := map[string]string{
			inbox.EventTeamCreated:        "team " + name + " created",
			inbox.EventTeamMembersAdded:   "added to team " + name + ": " + strings.Join(changed, ", "),
			inbox.EventTeamMembersRemoved: "removed from team " + name + ": " + strings.Join(changed, ", "),
		}[evType]
		payload, _ := json.Marshal(struct {
			Team    string   `json:"team"`
			Members []string `json:"members"`
		}{name, changed})
		r := &record{Team: t, Event: inbox.Event{Source: b.source, EventType: evType, Agent: by, Summary: summary,
			PayloadJSON: payload, CreatedAt: now}}
		data, _ := json.Marshal(r)
		ctx, cancel := b.ctx()
		_, err = b.js.Publish(ctx, b.teamSubject(name), data, jetstream.WithExpectLastSequencePerSubject(seq))
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

// resolve expands an address into the agents a message goes to: the
// agents it names, then the members of the teams it names other than the
// sender, in order and once each; "all" is the sender's one team.
func (b *Bus) resolve(from string, a inbox.Address) ([]string, error) {
	out := slices.Clone(a.Agents)
	teams := a.Teams
	if a.All {
		mine, err := b.teamsOf(from)
		if err != nil {
			return nil, err
		}
		switch len(mine) {
		case 0:
			return nil, inbox.Invalid("to", "%q means every member of the sender's team, but %s is in no team: address a team as @TEAM or agents as a,b", inbox.AllAgents, from)
		case 1:
			if !slices.Contains(teams, mine[0]) {
				teams = append(slices.Clip(teams), mine[0])
			}
		default:
			return nil, inbox.Invalid("to", "%q is ambiguous: %s is in teams %s; address one as @TEAM", inbox.AllAgents, from, strings.Join(mine, ", "))
		}
	}
	for _, name := range teams {
		t, _, err := b.team(name)
		if err != nil {
			return nil, err
		}
		if t == nil {
			return nil, b.noTeam("to", name)
		}
		n := 0
		for _, m := range t.Members {
			if m == from {
				continue
			}
			n++
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
		if n == 0 {
			return nil, inbox.Invalid("to", "team %s has no member other than %s: add members with inbox team add %s AGENT", name, orNone(from), name)
		}
	}
	return out, nil
}
