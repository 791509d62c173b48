package inbox

import (
	"context"
	"slices"
	"strings"
)

// Directory is what address resolution and team changes need from a
// backend: its teams. FindTeam returns nil (and no error) for a team that
// does not exist; TeamNames lists the names of the teams, sorted; Teams
// lists the teams, by name.
type Directory interface {
	FindTeam(ctx context.Context, name string) (*Team, error)
	TeamNames(ctx context.Context) ([]string, error)
	Teams(ctx context.Context) ([]*Team, error)
}

// MemberOf returns the names of the teams of d that agent is a member of.
func MemberOf(ctx context.Context, d Directory, agent string) ([]string, error) {
	teams, err := d.Teams(ctx)
	if err != nil {
		return nil, err
	}
	return TeamsOf(teams, agent), nil
}

// TeamsOf returns the names of the teams of teams agent is a member of,
// in the order given.
func TeamsOf(teams []*Team, agent string) []string {
	var out []string
	for _, t := range teams {
		if slices.Contains(t.Members, agent) {
			out = append(out, t.Name)
		}
	}
	return out
}

// NoTeam is the error for a team that does not exist, named in field
// ("to" for an address, else "team"); it lists the teams d has, or says
// how to create one.
func NoTeam(ctx context.Context, d Directory, field, name string) error {
	msg := "team " + name + " does not exist"
	if field == "to" {
		msg = "@" + name + " names no team"
	}
	if names, _ := d.TeamNames(ctx); len(names) > 0 {
		msg += " (teams: " + strings.Join(names, ", ") + ")"
	} else {
		msg += " (create it with inbox team create)"
	}
	return Errorf(ErrNotFound, "team_not_found", field, "%s", msg)
}

// Resolve expands an address into the agents a message goes to: the
// agents it names, then the members of the teams it names other than the
// sender, in order and once each. "all" is the sender's team, when it is
// in exactly one; from a sender in no team (seed 002's coordinator, who
// is usually not a member), the store's only team.
func Resolve(ctx context.Context, d Directory, from string, a Address) ([]string, error) {
	out := slices.Clone(a.Agents)
	teams := a.Teams
	if a.All {
		all, err := d.Teams(ctx)
		if err != nil {
			return nil, err
		}
		mine := TeamsOf(all, from)
		if len(mine) == 0 {
			mine, err = onlyTeam(all, from)
			if err != nil {
				return nil, err
			}
		}
		switch len(mine) {
		case 1:
			if !slices.Contains(teams, mine[0]) {
				teams = append(slices.Clip(teams), mine[0])
			}
		default:
			return nil, Invalid("to", "%q is ambiguous: %s is in teams %s; address one as @TEAM", AllAgents, from, strings.Join(mine, ", "))
		}
	}
	for _, name := range teams {
		t, err := d.FindTeam(ctx, name)
		if err != nil {
			return nil, err
		}
		if t == nil {
			return nil, NoTeam(ctx, d, "to", name)
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
			return nil, Invalid("to", "team %s has no member other than %s: add members with inbox team add %s AGENT", name, orNone(from), name)
		}
	}
	return out, nil
}

// onlyTeam is what "all" means from a sender in no team: the one team
// of all, named in a list of one; with none or several it is refused,
// naming them.
func onlyTeam(all []*Team, from string) ([]string, error) {
	switch len(all) {
	case 0:
		return nil, Invalid("to", "%q means the sender's team, but %s is in no team and there is no team: create one with inbox team create, or address agents as a,b", AllAgents, from)
	case 1:
		return []string{all[0].Name}, nil
	}
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.Name
	}
	return nil, Invalid("to", "%q means the sender's team, but %s is in no team and there are several (%s): address one as @TEAM", AllAgents, from, strings.Join(names, ", "))
}

// TeamChange is a change of a team's membership: its creation, or members
// added or removed (EventType says which), checked by PrepareTeamChange.
type TeamChange struct {
	By, Name  string
	EventType string
	Members   []string
}

// PrepareTeamChange checks a team change: the agent making it, the team's
// name and the members (at least one, but for a creation), without
// repeats.
func PrepareTeamChange(by, name string, members []string, evType string) (*TeamChange, error) {
	if err := ValidateAgent("agent", by); err != nil {
		return nil, err
	}
	if err := ValidateTeam("team", name); err != nil {
		return nil, err
	}
	ms, err := ValidateMembers(members, evType != EventTeamCreated)
	if err != nil {
		return nil, err
	}
	return &TeamChange{By: by, Name: name, EventType: evType, Members: ms}, nil
}

// Apply decides the change from the team's current state (cur, nil when
// there is none) at now. It returns the team as the change leaves it and
// the members the change's event names; no members means nothing
// changes, and next is cur. A team to add to or remove from must exist
// (d words the refusal); a team to create must not.
func (c *TeamChange) Apply(ctx context.Context, d Directory, cur *Team, now string) (next *Team, changed []string, err error) {
	if c.EventType != EventTeamCreated && cur == nil {
		return nil, nil, NoTeam(ctx, d, "team", c.Name)
	}
	t := &Team{}
	if cur != nil {
		*t = *cur
		t.Members = slices.Clone(cur.Members)
	}
	switch c.EventType {
	case EventTeamCreated:
		if t.CreatedAt != "" {
			return nil, nil, Errorf(ErrConflict, "team_exists", "team",
				"team %s already exists with members %s: add members with inbox team add", c.Name, orNone(strings.Join(t.Members, ", ")))
		}
		t.Members = c.Members
		changed = c.Members
	case EventTeamMembersAdded:
		for _, m := range c.Members {
			if !slices.Contains(t.Members, m) {
				t.Members = append(t.Members, m)
				changed = append(changed, m)
			}
		}
	case EventTeamMembersRemoved:
		for _, m := range c.Members {
			if !slices.Contains(t.Members, m) {
				return nil, nil, Errorf(ErrNotFound, "not_a_member", "member",
					"%s is not a member of team %s (members: %s)", m, c.Name, orNone(strings.Join(t.Members, ", ")))
			}
		}
		t.Members = slices.DeleteFunc(t.Members, func(m string) bool { return slices.Contains(c.Members, m) })
		changed = c.Members
	}
	if t.Members == nil {
		t.Members = []string{}
	}
	if cur != nil && len(changed) == 0 {
		return cur, nil, nil
	}
	if t.CreatedAt == "" {
		t.Name, t.CreatedBy, t.CreatedAt = c.Name, c.By, now
	}
	t.UpdatedAt = now
	return t, changed, nil
}

// Summary is the summary of the change's event, naming the members it
// changed.
func (c *TeamChange) Summary(changed []string) string {
	switch c.EventType {
	case EventTeamCreated:
		return "team " + c.Name + " created"
	case EventTeamMembersAdded:
		return "added to team " + c.Name + ": " + strings.Join(changed, ", ")
	case EventTeamMembersRemoved:
		return "removed from team " + c.Name + ": " + strings.Join(changed, ", ")
	}
	return ""
}

// ResolveTo parses and resolves recipients given to a message added to a
// thread (to, "" for the default recipient): the address as given and the
// agents it reaches.
func ResolveTo(ctx context.Context, d Directory, from, to string) (Address, []string, error) {
	if to == "" {
		return Address{}, nil, nil
	}
	addr, err := ParseAddress("to", to)
	if err != nil {
		return Address{}, nil, err
	}
	recipients, err := Resolve(ctx, d, from, addr)
	if err != nil {
		return Address{}, nil, err
	}
	return addr, recipients, nil
}
