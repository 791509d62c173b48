package spool

import (
	"github.com/inbox-dev/inbox"
)

// UnknownAgentWarnings returns a warning when name, given for role
// ("to", "parent", "from"), is an agent this store has never seen act,
// naming close matches among those it has (inbox.UnknownAgentWarnings).
// A queued task's name is known before it runs.
func (s *Store) UnknownAgentWarnings(role, name string) []string {
	return inbox.UnknownAgentWarnings(role, name, func(n string) bool { return s.known(n) || exists(s.taskPath(n)) }, s.agentNames)
}
