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
func CheckClaude(ctx context.Context, cfg Config, repair bool) ([]inbox.Finding, error) {
	b := newClaude(cfg)
	cfg = b.cfg
	if last, err := cfg.Bus.LastEventID(ctx); err != nil {
		return nil, err
	} else if err := b.teams.load(ctx, last); err != nil {
		return nil, err
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
	want, err := expected(ctx, cfg.Bus, "claude", func(team, member string) bool {
		return member != cfg.Agent && slices.Contains(members[team], member)
	})
	if err != nil {
		return nil, err
	}
	for _, team := range claude {
		for _, member := range members[team] {
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
			for _, m := range want[team+"/"+member] {
				e := entryOf(m)
				k := e.From + "\x00" + e.Timestamp + "\x00" + e.Text
				switch n := count[k]; {
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
