package teamfiles

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/inbox-dev/inbox"
)

// CheckClaude compares Claude Code's team inboxes under cfg.Dir with the
// store, and with repair makes them agree.
//
// A message counts as missing from a member's inbox only when the bridge
// never wrote it there (its state says what it wrote): an entry the
// bridge wrote and a person or a recipe later removed is theirs to
// remove, and repair never writes it back.
func CheckClaude(ctx context.Context, cfg Config, repair bool) ([]inbox.Finding, error) {
	b := newClaude(cfg)
	cfg = b.cfg
	var st claudeState
	if err := readJSON(b.statePath(), &st); err != nil && !errors.Is(err, errUnsafe) {
		return nil, fmt.Errorf("claude teams: read %s: %w", b.statePath(), err)
	}
	var out []inbox.Finding
	add := func(f inbox.Finding) *inbox.Finding { out = append(out, f); return &out[len(out)-1] }
	unsafe := unsafeFindings(add, repair)
	var claude []string
	members := map[string][]string{}
	for _, t := range b.claudeTeams() {
		ms, err := b.configMembers(t)
		if errors.Is(err, errUnsafe) {
			unsafe(err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, err := b.inboxFile(t, cfg.Agent, false); errors.Is(err, errUnsafe) {
			unsafe(err)
			continue
		}
		claude = append(claude, t)
		members[t] = ms
	}
	want, err := b.expected(ctx, claude, members)
	if err != nil {
		return nil, err
	}
	for _, team := range claude {
		// The bridge's own inbox is checked also before it joined.
		all := members[team]
		if !slices.Contains(all, cfg.Agent) {
			all = append(slices.Clip(all), cfg.Agent)
		}
		for _, member := range all {
			p := b.inboxPath(team, member)
			if err := regularOrMissing(p); err != nil {
				unsafe(err)
				continue
			}
			if member == cfg.Agent {
				es, err := readEntries(p)
				if err != nil {
					return nil, err
				}
				unread := 0
				for _, e := range es {
					if !e.Read {
						unread++
					}
				}
				if unread > 0 {
					f := add(inbox.Finding{Check: "team_file_not_taken_in", Path: p,
						Detail: fmt.Sprintf("%d entries teammates wrote are not taken in yet", unread)})
					if repair {
						b.ingestTeam(ctx, team)
						es, _ := readEntries(p)
						f.Repaired = !slices.ContainsFunc(es, func(e *claudeEntry) bool { return !e.Read })
					}
				}
				continue
			}
			es, err := readEntries(p)
			if err != nil {
				return nil, err
			}
			count := map[string]int{}
			for _, e := range es {
				count[e.From+"\x00"+e.Timestamp+"\x00"+e.Text]++
			}
			for _, d := range want[team+"/"+member] {
				m, e := d.m, entryOf(d.m)
				k := e.From + "\x00" + e.Timestamp + "\x00" + e.Text
				switch n := count[k]; {
				case n == 0 && st.wrote(team+"/"+member, d.event, m.MessageID):
					// Written, then removed by someone: theirs.
				case n == 0:
					f := add(inbox.Finding{Check: "team_file_missing_message", ThreadID: m.ThreadID, Path: p,
						Detail: "message " + m.MessageID + " was delivered to " + member + " but is not in the inbox"})
					if repair {
						f.Repaired = b.deliver(team, member, e) == nil
					}
				case n > 1:
					f := add(inbox.Finding{Check: "team_file_duplicate_message", ThreadID: m.ThreadID, Path: p,
						Detail: fmt.Sprintf("message %s is in the inbox %d times", m.MessageID, n)})
					if repair {
						f.Repaired = b.dedupeEntries(p, e) == nil
					}
				}
			}
		}
	}
	return out, nil
}

// expected lists, per "team/member" of the Claude Code teams given with
// their members, the messages the store delivered that belong in that
// member's inbox (claudeFiles), in event order.
func (b *claudeBridge) expected(ctx context.Context, teams []string, members map[string][]string) (map[string][]delivery, error) {
	where := map[string][]string{}
	for _, t := range teams {
		for _, m := range members[t] {
			if m != b.cfg.Agent {
				where[m] = append(where[m], t)
			}
		}
	}
	out := map[string][]delivery{}
	err := b.cfg.Bus.Events(ctx, 0, func(ev *inbox.Event) bool {
		m, origin := messageOf(ctx, b.cfg.Bus, ev)
		if m == nil {
			return true
		}
		for _, member := range inbox.RecipientsOf(m) {
			for _, team := range claudeFiles(m, member, where[member]) {
				if origin == nil || origin.Descriptor != claudeOrigin(team, member) {
					k := team + "/" + member
					out[k] = append(out[k], delivery{m, ev.EventID})
				}
			}
		}
		return true
	})
	return out, err
}

// dedupeEntries keeps the first of the entries equal to e, under the lock.
func (b *claudeBridge) dedupeEntries(p string, e *claudeEntry) error {
	return updateEntries(p, func(es []*claudeEntry) ([]*claudeEntry, bool) {
		seen := false
		kept := es[:0]
		for _, x := range es {
			if x.same(e) {
				if seen {
					continue
				}
				seen = true
			}
			kept = append(kept, x)
		}
		return kept, true
	})
}
