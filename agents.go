package inbox

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// UnknownAgentWarnings returns a warning when name, given for role ("to",
// "parent", "from", or "agent" for the agent a command acts as), is an
// agent the store has never seen (known, the engine's, says whether it
// has: seen means inbox agents lists it), naming close matches among the
// names the engine offers (names, asked only then): a misspelled name is
// not a silent orphan (SPEC 7). The call it warns about still goes ahead.
func UnknownAgentWarnings(ctx context.Context, role, name string, known func(context.Context, string) bool, names func(context.Context) []string) []string {
	if name == "" || ValidateAgent(role, name) != nil || known(ctx, name) {
		return nil
	}
	var msg string
	switch role {
	case "parent":
		msg = "agent " + name + " has never been seen in this store; the task's result will wait in its mailbox"
	case "from":
		msg = "agent " + name + " has never been seen in this store; nothing from it may ever arrive"
	case "agent":
		msg = "agent " + name + " has never been seen in this store; nothing was ever sent to it"
	default:
		msg = "agent " + name + " has never been seen in this store; the message waits for it"
	}
	if close := SimilarNames(name, names(ctx)); len(close) > 0 {
		msg += " (did you mean " + strings.Join(close, ", ") + "?)"
	}
	return []string{msg}
}

// UnknownRecipients warns, with warn, for each agent message m names
// explicitly (not through a team: a team's members were named when they
// joined).
func UnknownRecipients(ctx context.Context, m *Message, warn func(ctx context.Context, role, name string) []string) []string {
	if m == nil {
		return nil
	}
	addr, err := ParseAddress("to", m.ToAgent)
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addr.Agents {
		out = append(out, warn(ctx, "to", a)...)
	}
	return out
}

// SimilarNames returns up to five of names close to name, sorted: the
// same but for case, within an edit distance of 2, or (for a name of 3
// characters or more) one a prefix of the other.
func SimilarNames(name string, names []string) []string {
	var out []string
	low := strings.ToLower(name)
	for _, n := range names {
		ln := strings.ToLower(n)
		if n == name {
			continue
		}
		if ln == low || EditDistance(ln, low) <= 2 || (len(low) >= 3 && (strings.HasPrefix(ln, low) || strings.HasPrefix(low, ln))) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), 5)]
}

// AgentState is an agent's state (SPEC §7): working while it holds a live
// lease; waiting while a process is blocked for it; gone when something
// that shows it went away (a lease that ran out unreleased, a waiter that
// died) came after its last activity; else idle.
func AgentState(working, waiting bool, lastActivity time.Time, wentAway ...time.Time) string {
	switch {
	case working:
		return StateWorking
	case waiting:
		return StateWaiting
	}
	for _, t := range wentAway {
		if t.After(lastActivity) {
			return StateGone
		}
	}
	return StateIdle
}

// IdleReason is the reason an idle notification gives (its content's
// "reason", or "idleReason" as Claude Code writes it).
func IdleReason(m *Message) string {
	var c struct {
		Reason     string `json:"reason"`
		IdleReason string `json:"idleReason"` // Claude Code's own idle_notification
	}
	json.Unmarshal(m.PayloadJSON, &c)
	if c.Reason == "" {
		return c.IdleReason
	}
	return c.Reason
}

// RecipientsOf lists the agents a message is delivered to: its
// recipients, or the one agent it names.
func RecipientsOf(m *Message) []string {
	if len(m.Recipients) > 0 {
		return m.Recipients
	}
	if ValidateAgent("to", m.ToAgent) != nil {
		return nil // not an agent name (cannot happen: validated on the way in)
	}
	return []string{m.ToAgent}
}
