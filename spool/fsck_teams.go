package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// loggedTeams returns each team's newest state in the event log.
func (s *Store) loggedTeams() (map[string]*teamRecord, int64, error) {
	teams := map[string]*teamRecord{}
	var last int64
	err := s.log.scanFull(Pos{}, func(ev *logEvent, _ Pos) bool {
		last = max(last, ev.EventID)
		noteTeam(teams, ev)
		return true
	})
	return teams, last, err
}

// noteTeam records in teams the team's state that ev carries, if any.
func noteTeam(teams map[string]*teamRecord, ev *logEvent) {
	if ev.Team != nil {
		r := *ev.Team
		r.EventID = ev.EventID
		teams[r.Name] = &r
	}
}

// restoreTeams makes teams/ agree with the log: a team changed after the
// watermark is rewritten from its newest event, and a team file naming an
// event the log does not have (its line was lost) goes.
func (s *Store) restoreTeams(logged map[string]*teamRecord, after, last int64) error {
	for name, r := range logged {
		if r.EventID <= after {
			continue // on disk since the last checkpoint
		}
		if cur, err := s.readTeam(name); err == nil && cur != nil && cur.EventID == r.EventID {
			continue
		}
		if _, err := s.writeTeamFile(s.teamPath(name), r, nil); err != nil {
			return err
		}
	}
	names, err := s.teamNames()
	if err != nil {
		return err
	}
	for _, name := range names {
		if cur, err := s.readTeam(name); err == nil && cur != nil && cur.EventID > last && logged[name] == nil {
			if err := os.Remove(s.teamPath(name)); err != nil {
				return inbox.Storage(err, "remove team %s, which the log does not know", name)
			}
		}
	}
	return nil
}

// fsckTeams checks each team file against the newest state of the team
// in the log (the log is the truth: a file behind it, ahead of it or
// unreadable is rewritten from it, or removed when the log has no such
// team). Teams whose events were archived with old log segments are left
// as they are.
func (s *Store) fsckTeams(add addFinding, repair bool) error {
	names, err := s.teamNames()
	if err != nil || len(names) == 0 {
		return err
	}
	logged, last, err := s.loggedTeams()
	if err != nil {
		return err
	}
	for _, name := range names {
		p := s.teamPath(name)
		cur, rerr := s.readTeam(name)
		want := logged[name]
		var detail string
		switch {
		case rerr != nil:
			detail = "the team file is damaged"
		case cur == nil:
			continue
		case want == nil && cur.EventID > last:
			detail = fmt.Sprintf("names event %d, which the log never recorded", cur.EventID)
		case want != nil && cur.EventID != want.EventID:
			detail = fmt.Sprintf("holds the team as of event %d, the log's newest change is event %d", cur.EventID, want.EventID)
		default:
			continue
		}
		f := add(inbox.Finding{Check: "stale_team", Path: p, Detail: detail})
		if !repair {
			continue
		}
		if want != nil {
			_, err = s.writeTeamFile(p, want, nil)
		} else if rerr == nil {
			err = os.Remove(p)
		}
		f.Repaired = err == nil && (want != nil || rerr == nil)
		if f.Repaired {
			f.Detail += "; rewritten from the log"
		}
	}
	return nil
}

// fsckAcks checks acks/: a marker must name a committed message that
// asks its agent for an acknowledgment the agent has not given (markers a
// crash left behind go on repair), and every such message must have its
// markers (made again on repair).
func (s *Store) fsckAcks(headers map[string]*header, byEvent map[int64]*inbox.Message, add addFinding, repair bool) {
	eachMarker(filepath.Join(s.dir, acksDir), func(agent, p, tid string, seq int) {
		detail := ""
		h := headers[tid]
		switch {
		case h == nil && exists(s.archivedDir(tid)):
			return
		case h == nil || seq > h.MessageCount || !sameFile(p, filepath.Join(s.threadDir(tid), msgName(seq))):
			detail = "names a message that was never committed"
		default:
			m, err := s.readMessage(tid, seq)
			if err != nil {
				return // the message's own finding covers it
			}
			if a := s.ackOf(tid, m, agent); a != nil {
				detail = "an acknowledgment owed, but " + a.MessageID + " gave it"
			}
		}
		if detail != "" {
			add.removable(inbox.Finding{Check: "stale_ack_entry", ThreadID: tid, Path: p, Detail: detail}, repair)
		}
	})
	for _, m := range byEvent {
		if !inbox.WantsAck(m) || headers[m.ThreadID] == nil {
			continue
		}
		for _, to := range inbox.RecipientsOf(m) {
			p := filepath.Join(s.ackPath(to), markerName(m))
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) || s.ackOf(m.ThreadID, m, to) != nil {
				continue
			}
			f := add(inbox.Finding{Check: "missing_ack_entry", ThreadID: m.ThreadID, Path: p,
				Detail: "message " + m.MessageID + " asks " + to + " for an acknowledgment that is not recorded as owed"})
			if repair {
				_, err := s.linkMarker(s.ackPath(to), markerName(m), filepath.Join(s.threadDir(m.ThreadID), msgName(m.Seq)), false)
				f.Repaired = err == nil
			}
		}
	}
}
