package spool

import (
	"context"
	"github.com/inbox-dev/inbox"
)

// UnknownAgentWarnings returns a warning when name, given for role
// ("to", "parent", "from"), is an agent this store has never seen act,
// naming close matches among those it has (inbox.UnknownAgentWarnings).
// A queued task's name is known before it runs.
func (s *Store) UnknownAgentWarnings(ctx context.Context, role, name string) []string {
	return inbox.UnknownAgentWarnings(ctx, role, name, func(_ context.Context, n string) bool { return s.known(n) || exists(s.taskPath(n)) }, s.agentNames)
}
