package inbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
)

// teams is a Directory held in memory.
type teams map[string]*inbox.Team

func (d teams) FindTeam(_ context.Context, name string) (*inbox.Team, error) { return d[name], nil }

func (d teams) TeamNames(context.Context) ([]string, error) {
	var out []string
	for n := range d {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func (d teams) Teams(ctx context.Context) ([]*inbox.Team, error) {
	names, _ := d.TeamNames(ctx)
	var out []*inbox.Team
	for _, n := range names {
		out = append(out, d[n])
	}
	return out, nil
}

func TestResolve(t *testing.T) {
	d := teams{
		"red":  {Name: "red", Members: []string{"ann", "bob"}},
		"blue": {Name: "blue", Members: []string{"bob", "cy"}},
		"solo": {Name: "solo", Members: []string{"dee"}},
	}
	for _, tc := range []struct {
		from, to string
		want     []string
		code     string
	}{
		{"ann", "cy,@red", []string{"cy", "bob"}, ""},
		{"ann", "all", []string{"bob"}, ""},
		{"bob", "all", nil, "invalid_input"},   // in two teams
		{"eve", "all", nil, "invalid_input"},   // in none, and the store has three teams
		{"dee", "@solo", nil, "invalid_input"}, // no one but the sender
		{"ann", "@green", nil, "team_not_found"},
	} {
		a, err := inbox.ParseAddress("to", tc.to)
		if err != nil {
			t.Fatal(err)
		}
		got, err := inbox.Resolve(t.Context(), d, tc.from, a)
		var e *inbox.Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s to %s: %v", tc.from, tc.to, err)
		case tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code):
			t.Errorf("%s to %s: got %v, want %s", tc.from, tc.to, err, tc.code)
		case !slices.Equal(got, tc.want):
			t.Errorf("%s to %s: got %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

// TestResolveAllOutsideTeams: "all" from a sender in no team (seed 002's
// coordinator) is the store's only team; with none or several it is
// refused, naming them.
func TestResolveAllOutsideTeams(t *testing.T) {
	all := inbox.Address{All: true}
	one := teams{"alpha": {Name: "alpha", Members: []string{"backend-dev", "tester"}}}
	got, err := inbox.Resolve(t.Context(), one, "coordinator", all)
	if err != nil || !slices.Equal(got, []string{"backend-dev", "tester"}) {
		t.Errorf("the only team: got %v %v, want backend-dev and tester", got, err)
	}
	two := teams{"alpha": one["alpha"], "beta": {Name: "beta", Members: []string{"cy"}}}
	_, err = inbox.Resolve(t.Context(), two, "coordinator", all)
	var e *inbox.Error
	if !errors.As(err, &e) || e.Code != "invalid_input" || !strings.Contains(err.Error(), "alpha, beta") {
		t.Errorf("two teams: got %v, want invalid_input naming alpha, beta", err)
	}
	if _, err := inbox.Resolve(t.Context(), teams{}, "coordinator", all); !errors.As(err, &e) || e.Code != "invalid_input" || !strings.Contains(err.Error(), "no team") {
		t.Errorf("no team: got %v, want invalid_input saying there is no team", err)
	}
}

func TestTeamChangeApply(t *testing.T) {
	d := teams{}
	c, err := inbox.PrepareTeamChange("ann", "red", []string{"bob", "bob", "cy"}, inbox.EventTeamMembersAdded)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Apply(t.Context(), d, nil, "t1"); !errors.Is(err, inbox.ErrNotFound) {
		t.Errorf("adding to no team: got %v, want not found", err)
	}
	cur := &inbox.Team{Name: "red", Members: []string{"bob"}, CreatedBy: "ann", CreatedAt: "t0", UpdatedAt: "t0"}
	next, changed, err := c.Apply(t.Context(), d, cur, "t1")
	if err != nil || !slices.Equal(changed, []string{"cy"}) || !slices.Equal(next.Members, []string{"bob", "cy"}) || next.UpdatedAt != "t1" {
		t.Errorf("got %+v %v %v, want bob and cy, cy added at t1", next, changed, err)
	}
	if !slices.Equal(cur.Members, []string{"bob"}) {
		t.Errorf("the current team changed: %v", cur.Members)
	}
	if got, want := c.Summary(changed), "added to team red: cy"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSimilarNames(t *testing.T) {
	got := inbox.SimilarNames("worker", []string{"worker", "Worker", "wroker", "work", "other"})
	if want := []string{"Worker", "work", "wroker"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
