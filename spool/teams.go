package spool

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
func (s *Store) Team(ctx context.Context, name string) (*inbox.Team, error) {
	if err := inbox.ValidateTeam("team", name); err != nil {
		return nil, err
	}
	r, err := s.readTeam(name)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, inbox.NoTeam(ctx, teamDir{s}, "team", name)
	}
	return &r.Team, nil
}

// teamDir is the store as the rules of package inbox see its teams.
type teamDir struct{ s *Store }

var _ inbox.Directory = teamDir{}

func (d teamDir) FindTeam(_ context.Context, name string) (*inbox.Team, error) {
	r, err := d.s.readTeam(name)
	if r == nil || err != nil {
		return nil, err
	}
	return &r.Team, nil
}

func (d teamDir) TeamNames(context.Context) ([]string, error)      { return d.s.teamNames() }
func (d teamDir) Teams(ctx context.Context) ([]*inbox.Team, error) { return d.s.Teams(ctx) }

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
func (s *Store) Teams(ctx context.Context) ([]*inbox.Team, error) {
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

// changeTeam decides the change (inbox.TeamChange) under the team's lock
// and commits it as an event of type evType. A change that changes
// nothing writes nothing.
func (s *Store) changeTeam(ctx context.Context, by, name string, members []string, evType string) (*inbox.Team, error) {
	c, err := inbox.PrepareTeamChange(by, name, members, evType)
	if err != nil {
		return nil, err
	}
	if s.linkErr != nil {
		return nil, s.linkErr
	}
	if err := refuseLink(filepath.Join(s.dir, teamsDir)); err != nil {
		return nil, err
	}
	lk := newLock(s.lockFile("teams.lock"), s.fileMode)
	if err := s.lockWithin(ctx, lk, "teams"); err != nil {
		return nil, err
	}
	defer lk.Unlock()
	cur, err := s.readTeam(name)
	if err != nil {
		return nil, err
	}
	var curTeam *inbox.Team
	if cur != nil {
		curTeam = &cur.Team
	}
	now := inbox.FormatTime(s.now())
	next, changed, err := c.Apply(ctx, teamDir{s}, curTeam, now)
	if err != nil {
		return nil, err
	}
	if cur != nil && len(changed) == 0 {
		return &cur.Team, nil // nothing to do
	}
	r := &teamRecord{Team: *next}
	payload := jsonrec.Fields{}.Str("team", name).Strs("members", changed).JSON()
	ev := &logEvent{Event: inbox.Event{Source: s.source, EventType: evType, Agent: by, Summary: c.Summary(changed),
		PayloadJSON: payload, CreatedAt: now}, Team: r}
	p := s.teamPath(name)
	var undo func()
	_, _, err = s.log.appendAfter(ctx, ev, func() error {
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

// resolve expands an address into the agents a message goes to
// (inbox.Resolve over the store's teams).
func (s *Store) resolve(ctx context.Context, from string, a inbox.Address) ([]string, error) {
	return inbox.Resolve(ctx, teamDir{s}, from, a)
}
