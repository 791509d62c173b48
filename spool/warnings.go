package spool

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inbox-dev/inbox"
)

// Unknown agents. An agent is seen once inbox agents lists it (SPEC §7
// Presence): it acted (agents/<name>), waited (presence/<name>), was sent
// mail (mailbox/<name>), or is a queued task's name. A warning about a
// recipient is decided after its message committed, so the message's own
// mailbox marker does not count.

// UnknownAgentWarnings returns a warning when name, given for role
// ("to", "parent", "from", "agent"), is an agent this store has never
// seen, naming close matches among those it has
// (inbox.UnknownAgentWarnings).
func (s *Store) UnknownAgentWarnings(ctx context.Context, role, name string) []string {
	return inbox.UnknownAgentWarnings(ctx, role, name, func(_ context.Context, n string) bool { return s.seenBefore(n, nil) }, s.listedNames)
}

// recipientWarnings warns for each agent m names explicitly that the
// store had not seen before m (inbox.UnknownRecipients); m's other
// recipients are not offered as close matches.
func (s *Store) recipientWarnings(ctx context.Context, m *inbox.Message) []string {
	names := func(ctx context.Context) []string {
		return slices.DeleteFunc(s.listedNames(ctx), func(n string) bool { return slices.Contains(inbox.RecipientsOf(m), n) })
	}
	return inbox.UnknownRecipients(ctx, m, func(ctx context.Context, role, name string) []string {
		return inbox.UnknownAgentWarnings(ctx, role, name, func(_ context.Context, n string) bool { return s.seenBefore(n, m) }, names)
	})
}

// seenBefore reports whether inbox agents lists agent for something other
// than m (nil: anything). An agent that acted costs one stat; the mailbox
// is read only for an agent that never acted, and only its first entries.
func (s *Store) seenBefore(agent string, m *inbox.Message) bool {
	if s.known(agent) || exists(filepath.Join(s.dir, presenceDir, agent)) || exists(s.taskPath(agent)) {
		return true
	}
	f, err := os.Open(s.mailboxPath(agent))
	if err != nil {
		return false
	}
	defer f.Close()
	// At most .collected/ (made with the mailbox; who collected acted),
	// m's own marker and one more.
	names, _ := f.Readdirnames(3)
	own := ""
	if m != nil {
		own = markerName(m)
	}
	return slices.ContainsFunc(names, func(n string) bool { return n != own && !strings.HasPrefix(n, ".") })
}

// listedNames lists the agents inbox agents would list from the store's
// directories (those that acted, were sent mail or waited): the names a
// warning offers as close matches.
func (s *Store) listedNames(context.Context) []string {
	seen := map[string]bool{}
	var out []string
	for _, dir := range []string{agentsDir, mailboxDir, presenceDir} {
		entries, _ := os.ReadDir(filepath.Join(s.dir, dir))
		for _, e := range entries {
			if !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, e.Name())
			}
		}
	}
	return out
}
