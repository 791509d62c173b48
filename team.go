package inbox

import (
	"encoding/json"
	"slices"
	"strings"
)

// Teams and typed messages: seed 002's protocol on the bus (SPEC §10).

// Team is a named set of agents. A message sent to "@NAME" goes to every
// member but its sender.
type Team struct {
	Name      string   `json:"name"`
	Members   []string `json:"members"`
	CreatedBy string   `json:"created_by"`
	CreatedAt string   `json:"created_at"`
	UpdatedAt string   `json:"updated_at"`
}

// Event types of team changes.
const (
	EventTeamCreated        = "team_created"
	EventTeamMembersAdded   = "team_members_added"
	EventTeamMembersRemoved = "team_members_removed"
)

// Seed 002's message types. Any other lower-case [a-z_]+ type is allowed
// too.
const (
	TypeTaskAssignment       = "task_assignment"
	TypeTaskStatusRequest    = "task_status_request"
	TypeTaskStatusResponse   = "task_status_response"
	TypeMessage              = "message"
	TypeTeamBroadcast        = "team_broadcast"
	TypeIdleNotification     = "idle_notification"
	TypeTaskCompletion       = "task_completion"
	TypeBlockingNotification = "blocking_notification"
	TypeAcknowledgment       = "acknowledgment"
)

// MessageTypes lists seed 002's types.
var MessageTypes = []string{TypeTaskAssignment, TypeTaskStatusRequest, TypeTaskStatusResponse, TypeMessage,
	TypeTeamBroadcast, TypeIdleNotification, TypeTaskCompletion, TypeBlockingNotification, TypeAcknowledgment}

// MaxTypeLen bounds a message type.
const MaxTypeLen = 64

// ValidateType checks a message type: 1–64 characters from a–z and _.
func ValidateType(field, typ string) error {
	if typ == "" {
		return Invalid(field, "is empty: give a type such as %s", strings.Join(MessageTypes[:3], ", "))
	}
	if len(typ) > MaxTypeLen {
		return Invalid(field, "is %d bytes long; a type may have at most %d", len(typ), MaxTypeLen)
	}
	for i := 0; i < len(typ); i++ {
		if c := typ[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return Invalid(field, "%q: a type is lower-case letters and _ only (seed 002's: %s)", typ, strings.Join(MessageTypes, " "))
		}
	}
	return nil
}

// KindForType is the message kind a typed message gets when none is
// given: a task assignment is work (task); a status request or a blocking
// notification asks (question); a status response answers (answer); a
// completion reports a result (result); an acknowledgment or an idle
// notification is an event. Other types (message, team_broadcast, …)
// give "": the kind a send or reply without a type would get.
func KindForType(typ string) string {
	switch typ {
	case TypeTaskAssignment:
		return KindTask
	case TypeTaskStatusRequest, TypeBlockingNotification:
		return KindQuestion
	case TypeTaskStatusResponse:
		return KindAnswer
	case TypeTaskCompletion:
		return KindResult
	case TypeAcknowledgment, TypeIdleNotification:
		return KindEvent
	}
	return ""
}

// ValidateTeam checks a team name: the rules of an agent name (it becomes
// a file name).
func ValidateTeam(field, name string) error {
	if err := ValidateAgent(field, name); err != nil {
		e := err.(*Error)
		e.Rule = strings.ReplaceAll(e.Rule, "agent name", "team name")
		return e
	}
	return nil
}

// AllAgents is the recipient seed 002 writes for a broadcast ("to":"all"):
// every member of the sender's team but the sender, when the sender is in
// exactly one team.
const AllAgents = "all"

// Address is a parsed --to: the agents and the teams it names, in the
// order given, without repeats.
type Address struct {
	// Given is the value as given (repeated values joined with ","): what
	// a message records as to_agent.
	Given  string
	Agents []string
	Teams  []string
	// All is set when the value names "all".
	All bool
}

// ParseAddress parses recipients: each value is an agent, "a,b", "@team"
// or "all", and several may be given. An empty value is refused, never
// dropped.
func ParseAddress(field string, values ...string) (Address, error) {
	var a Address
	var given []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			return Address{}, Invalid(field, "is empty: name an agent, several (a,b) or a team (@team)")
		}
		given = append(given, v)
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			switch {
			case part == "":
				return Address{}, Invalid(field, "%q has an empty name between commas", v)
			case part == AllAgents:
				a.All = true
			case strings.HasPrefix(part, "@"):
				name := part[1:]
				if err := ValidateTeam(field, name); err != nil {
					return Address{}, err
				}
				if !slices.Contains(a.Teams, name) {
					a.Teams = append(a.Teams, name)
				}
			default:
				if err := ValidateAgent(field, part); err != nil {
					return Address{}, err
				}
				if !slices.Contains(a.Agents, part) {
					a.Agents = append(a.Agents, part)
				}
			}
		}
	}
	a.Given = strings.Join(given, ",")
	return a, nil
}

// Single reports whether the address is exactly one agent.
func (a Address) Single() bool { return !a.All && len(a.Teams) == 0 && len(a.Agents) == 1 }

// ContentSummary is what a typed message's content says it is about: its
// "text", else "subject", "reason" or "notes", as one shortened line; ""
// when it has none of them.
func ContentSummary(payloadJSON json.RawMessage) string {
	var fields map[string]any
	if json.Unmarshal(payloadJSON, &fields) != nil {
		return ""
	}
	for _, k := range []string{"text", "subject", "reason", "notes"} {
		if t, ok := fields[k].(string); ok && strings.TrimSpace(t) != "" {
			return Shorten(FirstLine(t), 200)
		}
	}
	return ""
}

// ContentSubject is the "subject" of a typed message's content (seed 002's
// task_assignment carries one), as the subject of the thread it starts.
func ContentSubject(payloadJSON string) string {
	var fields map[string]any
	if json.Unmarshal([]byte(payloadJSON), &fields) != nil {
		return ""
	}
	if t, ok := fields["subject"].(string); ok {
		return Shorten(FirstLine(t), 80)
	}
	return ""
}
