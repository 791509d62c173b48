package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

var agentsCommand = &command{
	name: "agents", short: "every agent the store has seen, with activity, leases and mail",
	long: `List every agent the store has seen, as sender or recipient, with its state,
when it was last seen (in any role) and last acted (null if it never has),
its live leases, open threads assigned to it and mailbox depth.

States: working (holds a live lease); waiting (a process is blocked for it
right now in receive, wait-reply or watch, proven by a lock that process
holds, not by a timestamp); gone (its lease ran out unreleased, or its
process died while waiting, and it has not acted since); idle (anything
else). That is how a leader tells an idle agent from a dead one. Sending to
an agent that never acted here warns and names close matches.`,
	examples: []string{"inbox agents", "inbox agents --json"},
	new:      func() runner { return &agentsCmd{} },
}

type agentsCmd struct{}

func (r *agentsCmd) flags(fs *pflag.FlagSet, c *call) {}

func (r *agentsCmd) run(c *call) (*result, error) {
	s, err := c.openNoArgs()
	if err != nil {
		return nil, err
	}
	as, err := s.Agents(c.ctx)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("agents", as)
	res.human = func(w io.Writer) {
		ago := func(ts string) string {
			t, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				return "-"
			}
			return time.Since(t).Round(time.Second).String() + " ago"
		}
		var rows [][]string
		for _, a := range as {
			last := "never acted"
			if a.LastActivity != nil {
				last = ago(*a.LastActivity)
			}
			teams := strings.Join(a.Teams, ",")
			if teams == "" {
				teams = "-"
			}
			rows = append(rows, []string{a.Agent, a.State, ago(a.LastSeen), last,
				fmt.Sprint(len(a.LiveLeases)), fmt.Sprint(a.Assigned), fmt.Sprint(a.MailboxDepth),
				fmt.Sprint(len(a.Unacknowledged)), teams})
		}
		table(w, []string{"AGENT", "STATE", "LAST SEEN", "LAST ACTIVITY", "LIVE LEASES", "OPEN THREADS", "MAILBOX", "UNACKED", "TEAMS"}, rows)
	}
	return res, nil
}
