package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

var teamCommand = &command{
	name: "team", args: "create|add|remove|show|list [NAME] [MEMBER...]", short: "keep named teams of agents (seed 002's teams)",
	long: `A team is a named set of agents kept in the store. Send to every member
but yourself with --to @NAME (the message is stored once and lands in each
member's mailbox; a work thread is offered to all of them until one claims
it). Membership changes are events (inbox events shows them).

  team create NAME [MEMBER...]   a new team (exit 20 if it exists)
  team add NAME MEMBER...        add members (those already in stay)
  team remove NAME MEMBER...     remove members (exit 40 for a non-member)
  team show NAME                 the team, its members, and what each has
                                 not acknowledged
  team list                      every team

Members may also be given as --member A (repeatable, or a,b). An unknown
team is exit 40; sending to a team with no member but the sender, 30.`,
	examples: []string{
		"inbox team create team-alpha --member backend-dev --member frontend-dev --member tester --agent coordinator",
		"inbox team add team-alpha reviewer",
		`inbox send --from coordinator --to @team-alpha --type team_broadcast --content-json '{"text":"Daily standup in 30 minutes"}'`,
		"inbox team show team-alpha --json",
	},
	new: func() runner { return &teamCmd{} },
}

type teamCmd struct {
	members []string
}

func (r *teamCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringSliceVar(&r.members, "member", nil, "a member (repeatable, or a,b)")
	c.agentFlag("who makes the change, recorded in its event (env INBOX_AGENT, default main)")
}

var teamVerbs = []string{"create", "add", "remove", "show", "list"}

func (r *teamCmd) run(c *call) (*result, error) {
	if len(c.args) == 0 {
		return nil, usagef("", "inbox team needs one of %s (inbox team --help)", strings.Join(teamVerbs, "|"))
	}
	verb, args := c.args[0], c.args[1:]
	name := ""
	switch verb {
	case "list":
		if len(args) > 0 || len(r.members) > 0 {
			return nil, usagef("", "inbox team list takes no arguments")
		}
	case "create", "add", "remove", "show":
		if len(args) == 0 {
			return nil, usagef("team", "inbox team %s needs the team's NAME", verb)
		}
		name, args = strings.TrimPrefix(args[0], "@"), args[1:]
	default:
		return nil, usagef("", "unknown team command %q: give one of %s", verb, strings.Join(teamVerbs, "|"))
	}
	members := append(args, r.members...)
	if verb == "show" && len(members) > 0 {
		return nil, usagef("member", "inbox team show takes only the team's NAME")
	}
	if (verb == "add" || verb == "remove") && len(members) == 0 {
		return nil, usagef("member", "inbox team %s %s needs at least one MEMBER", verb, name)
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	res := &result{}
	if verb == "list" {
		teams, err := s.Teams(c.ctx)
		if err != nil {
			return nil, err
		}
		res.set("teams", teams)
		res.human = func(w io.Writer) {
			if len(teams) == 0 {
				fmt.Fprintln(w, "no teams (create one with inbox team create NAME MEMBER...)")
				return
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TEAM\tMEMBERS")
			for _, t := range teams {
				fmt.Fprintf(tw, "%s\t%s\n", t.Name, strings.Join(t.Members, ", "))
			}
			tw.Flush()
		}
		return res, nil
	}
	by := c.g.agent
	if by == "" {
		by = "main"
	}
	var t *inbox.Team
	switch verb {
	case "create":
		t, err = s.CreateTeam(c.ctx, by, name, members)
	case "add":
		t, err = s.AddMembers(c.ctx, by, name, members)
	case "remove":
		t, err = s.RemoveMembers(c.ctx, by, name, members)
	case "show":
		t, err = s.Team(c.ctx, name)
	}
	if err != nil {
		return nil, err
	}
	res.set("team", t)
	owed := map[string][]*inbox.Message{}
	if verb == "show" {
		list := []map[string]any{}
		for _, m := range t.Members {
			msgs, err := s.Unacknowledged(c.ctx, m)
			if err != nil {
				return nil, err
			}
			owed[m] = msgs
			ids := []string{}
			for _, x := range msgs {
				ids = append(ids, x.MessageID)
			}
			list = append(list, map[string]any{"agent": m, "unacknowledged": ids})
		}
		res.set("members", list)
	}
	res.human = func(w io.Writer) {
		switch verb {
		case "create":
			fmt.Fprintf(w, "created team %s: %s\n", t.Name, orNoMembers(t.Members))
		case "add", "remove":
			fmt.Fprintf(w, "team %s: %s\n", t.Name, orNoMembers(t.Members))
		case "show":
			fmt.Fprintf(w, "team %s (created by %s at %s)\n", t.Name, t.CreatedBy, t.CreatedAt)
			if len(t.Members) == 0 {
				fmt.Fprintln(w, "  no members (add some with inbox team add)")
			}
			for _, m := range t.Members {
				line := "  " + m
				if n := len(owed[m]); n > 0 {
					line += fmt.Sprintf("  (owes %d acknowledgment(s):", n)
					for _, x := range owed[m] {
						line += " " + x.MessageID
					}
					line += ")"
				}
				fmt.Fprintln(w, line)
			}
		}
	}
	return res, nil
}

func orNoMembers(ms []string) string {
	if len(ms) == 0 {
		return "no members"
	}
	return strings.Join(ms, ", ")
}

var ackCommand = &command{
	name: "ack", short: "acknowledge a message that asked for it",
	long: `Acknowledge a message sent with --ack-required (seed 002's acknowledgment):
an acknowledgment message (type acknowledgment, content {"ackId": …}) in the
message's thread, to its sender, who sees it in its mailbox. Until then the
message is listed as unacknowledged by inbox mailbox, inbox agents and inbox
team show. Acknowledging twice is harmless: the second returns the first.

--thread is needed only for a message the store cannot find among those
the agent owes (one already acknowledged, for example).`,
	examples: []string{
		"inbox ack --agent backend-dev --message msg_01...",
		"inbox ack --agent backend-dev --message msg_01... --thread thr_01... --json",
	},
	new: func() runner { return &ackCmd{} },
}

type ackCmd struct {
	message, thread string
	content         contentFlags
}

func (r *ackCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("who acknowledges (env INBOX_AGENT)")
	fs.StringVar(&r.message, "message", "", "the message to acknowledge (required)")
	fs.StringVar(&r.thread, "thread", "", "its thread (found when omitted)")
	r.content.register(fs, "one-line summary (default: acknowledged: and the message's summary)", true)
}

func (r *ackCmd) run(c *call) (*result, error) {
	agent, err := c.agentNoArgs()
	if err != nil {
		return nil, err
	}
	if r.message == "" {
		return nil, usagef("message", "--message is required: the id of the message to acknowledge")
	}
	s, content, err := c.openContent(&r.content)
	if err != nil {
		return nil, err
	}
	out, err := s.Ack(c.ctx, agent, r.message, r.thread, content)
	if err != nil {
		return nil, err
	}
	res := messageResult(out)
	res.human = func(w io.Writer) {
		m := out.Message
		fmt.Fprintf(w, "acknowledged %s: %s → %s in %s%s\n", r.message, m.FromAgent, m.ToAgent, m.ThreadID, replayNote(out))
	}
	return res, nil
}
