package spool

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gofrs/flock"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// Teams (SPEC §10). A team is teams/<name>.json, a teamRecord: the team as
// its newest change left it, and that change's event id. A change takes
// locks/teams.lock, reads the file, writes the new one (temp file and
// rename, no fsync) with the id of the event it is about to append, and
// appends that event, which carries the whole record: the log line is the
// commit point, as for a thread, and replay rewrites the file from it
// after a power cut.

const teamsDir = "teams"

func (s *Store) teamPath(name string) string {
	return filepath.Join(s.dir, teamsDir, name+".json")
}

// readTeam returns the team, or nil when there is none.
func (s *Store) readTeam(name string) (*teamRecord, error) {
	data, err := readFile(s.teamPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, inbox.Storage(err, "read team %s", name)
	}
	var r teamRecord
	if err := r.decodeJSON(data); err != nil {
		return nil, corrupt(errors.Join(errDamaged, err), "team %s: %s is not valid JSON", name, s.teamPath(name))
	}
	return &r, nil
}

// Team returns a team.
func (s *Store) Team(name string) (*inbox.Team, error) {
	if err := inbox.ValidateTeam("team", name); err != nil {
		return nil, err
	}
	r, err := s.readTeam(name)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, s.noTeam("team", name)
	}
	return &r.Team, nil
}

func (s *Store) noTeam(field, name string) error {
	msg := "team " + name + " does not exist"
	if field == "to" {
		msg = "@" + name + " names no team"
	}
	if names, _ := s.teamNames(); len(names) > 0 {
		msg += " (teams: " + strings.Join(names, ", ") + ")"
	} else {
		msg += " (create it with inbox team create)"
	}
	return inbox.Errorf(inbox.ErrNotFound, "team_not_found", field, "%s", msg)
}

func (s *Store) teamNames() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, teamsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, inbox.Storage(err, "list teams")
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && inbox.ValidateTeam("team", name) == nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Teams lists every team, by name.
func (s *Store) Teams() ([]*inbox.Team, error) {
	names, err := s.teamNames()
	if err != nil {
		return nil, err
	}
	out := []*inbox.Team{}
	for _, n := range names {
		r, err := s.readTeam(n)
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, &r.Team)
		}
	}
	return out, nil
}

// teamsOf returns the names of the teams agent is a member of.
func (s *Store) teamsOf(agent string) ([]string, error) {
	teams, err := s.Teams()
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

// CreateTeam creates a team; a team of that name must not exist.
func (s *Store) CreateTeam(by, name string, members []string) (*inbox.Team, error) {
	return s.changeTeam(by, name, members, false, inbox.EventTeamCreated, func(r *teamRecord, ms []string) ([]string, error) {
		if r.CreatedAt != "" {
			return nil, inbox.Errorf(inbox.ErrConflict, "team_exists", "team",
				"team %s already exists with members %s: add members with inbox team add", name, orNone(strings.Join(r.Members, ", ")))
		}
		r.Members = ms
		return ms, nil
	})
}

// AddMembers adds members to a team; those already in it stay as they are.
func (s *Store) AddMembers(by, name string, members []string) (*inbox.Team, error) {
	return s.changeTeam(by, name, members, true, inbox.EventTeamMembersAdded, func(r *teamRecord, ms []string) ([]string, error) {
		var added []string
		for _, m := range ms {
			if !slices.Contains(r.Members, m) {
				r.Members = append(r.Members, m)
				added = append(added, m)
			}
		}
		return added, nil
	})
}

// RemoveMembers removes members from a team; each must be a member.
func (s *Store) RemoveMembers(by, name string, members []string) (*inbox.Team, error) {
	return s.changeTeam(by, name, members, true, inbox.EventTeamMembersRemoved, func(r *teamRecord, ms []string) ([]string, error) {
		for _, m := range ms {
			if !slices.Contains(r.Members, m) {
				return nil, inbox.Errorf(inbox.ErrNotFound, "not_a_member", "member",
					"%s is not a member of team %s (members: %s)", m, name, orNone(strings.Join(r.Members, ", ")))
			}
		}
		r.Members = slices.DeleteFunc(r.Members, func(m string) bool { return slices.Contains(ms, m) })
		return ms, nil
	})
}

// changeTeam applies change to the team under its lock and commits it as
// an event of type evType. exist says the team must exist (else it must
// not: change sees an empty record). change returns the members the
// event names; none means nothing changed, and nothing is written.
func (s *Store) changeTeam(by, name string, members []string, exist bool, evType string,
	change func(r *teamRecord, members []string) ([]string, error)) (*inbox.Team, error) {
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
	if s.linkErr != nil {
		return nil, s.linkErr
	}
	if err := refuseLink(filepath.Join(s.dir, teamsDir)); err != nil {
		return nil, err
	}
	lk := flock.New(s.lockFile("teams.lock"), flock.SetPermissions(s.fileMode))
	if err := s.lockWithin(lk, "teams"); err != nil {
		return nil, err
	}
	defer lk.Unlock()
	cur, err := s.readTeam(name)
	if err != nil {
		return nil, err
	}
	if exist && cur == nil {
		return nil, s.noTeam("team", name)
	}
	r := &teamRecord{}
	if cur != nil {
		r.Team = cur.Team
		r.Members = slices.Clone(cur.Members)
	}
	changed, err := change(r, ms)
	if err != nil {
		return nil, err
	}
	if r.Members == nil {
		r.Members = []string{}
	}
	if cur != nil && len(changed) == 0 {
		return &cur.Team, nil // nothing to do
	}
	now := inbox.FormatTime(s.now())
	if r.CreatedAt == "" {
		r.Name, r.CreatedBy, r.CreatedAt = name, by, now
	}
	r.UpdatedAt = now
	summary := map[string]string{
		inbox.EventTeamCreated:        "team " + name + " created",
		inbox.EventTeamMembersAdded:   "added to team " + name + ": " + strings.Join(changed, ", "),
		inbox.EventTeamMembersRemoved: "removed from team " + name + ": " + strings.Join(changed, ", "),
	}[evType]
	payload := jsonrec.Fields{}.Str("team", name).Strs("members", changed).JSON()
	ev := &logEvent{Event: inbox.Event{Source: s.source, EventType: evType, Agent: by, Summary: summary,
		PayloadJSON: payload, CreatedAt: now}, Team: r}
	p := s.teamPath(name)
	var undo func()
	_, _, err = s.log.appendAfter(ev, func() error {
		r.EventID = ev.EventID
		var err error
		undo, err = s.writeTeamFile(p, r, cur)
		return err
	})
	if err != nil {
		if undo != nil {
			undo()
		}
		return nil, err
	}
	s.seen(by)
	if evType != inbox.EventTeamMembersRemoved {
		for _, m := range changed {
			s.seen(m) // named as a member: known from now on
		}
	}
	return &r.Team, nil
}

// writeTeamFile writes a team's file (temp file and rename, no fsync: the
// log line that follows commits it) and returns how to put back cur.
func (s *Store) writeTeamFile(p string, r, cur *teamRecord) (undo func(), err error) {
	if err := os.Mkdir(filepath.Dir(p), s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, inbox.Storage(err, "create %s", teamsDir)
	}
	st, err := s.stage(p, encodeLine(r.appendJSON(nil)))
	if err != nil {
		return nil, err
	}
	if err := os.Rename(st.tmp, p); err != nil {
		os.Remove(st.tmp)
		return nil, inbox.Storage(err, "write team %s", r.Name)
	}
	return func() {
		if cur == nil {
			os.Remove(p)
			return
		}
		if st, err := s.stage(p, encodeLine(cur.appendJSON(nil))); err == nil {
			os.Rename(st.tmp, p)
		}
	}, nil
}

// resolve expands an address into the agents a message goes to: the
// agents it names, then the members of the teams it names other than the
// sender, in order and once each. "all" is the sender's team, when it is
// in exactly one.
func (s *Store) resolve(from string, a inbox.Address) ([]string, error) {
	out := slices.Clone(a.Agents)
	teams := a.Teams
	if a.All {
		mine, err := s.teamsOf(from)
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
		r, err := s.readTeam(name)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, s.noTeam("to", name)
		}
		n := 0
		for _, m := range r.Members {
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
