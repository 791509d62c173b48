package inbox_test

import (
	"context"
	"errors"
	"slices"
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
		{"eve", "all", nil, "invalid_input"},   // in none
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
