package spool

import (
	"strings"

	"github.com/inbox-dev/inbox"
)

// UnknownAgentWarnings returns a warning when name, given for role
// ("to", "parent", "from"), is an agent this store has never seen act,
// naming close matches among those it has: a misspelled name is not a
// silent orphan (SPEC 7). The call it warns about still goes ahead.
func (s *Store) UnknownAgentWarnings(role, name string) []string {
	if name == "" || inbox.ValidateAgent(role, name) != nil || s.known(name) || exists(s.taskPath(name)) {
		return nil // (a queued task's name is known before it runs)
	}
	var msg string
	switch role {
	case "parent":
		msg = "agent " + name + " has never been seen in this store; the task's result will wait in its mailbox"
	case "from":
		msg = "agent " + name + " has never been seen in this store; nothing from it may ever arrive"
	default:
		msg = "agent " + name + " has never been seen in this store; the message waits for it"
	}
	if close := s.similarAgents(name); len(close) > 0 {
		msg += " (did you mean " + strings.Join(close, ", ") + "?)"
	}
	return []string{msg}
}
