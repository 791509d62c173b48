package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
)

type agentsCmd struct{}

func (r *agentsCmd) flags(fs *pflag.FlagSet, c *call) {}

func (r *agentsCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	as, err := s.Agents()
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
			rows = append(rows, []string{a.Agent, a.State, ago(a.LastSeen), last,
				fmt.Sprint(len(a.LiveLeases)), fmt.Sprint(a.Assigned), fmt.Sprint(a.MailboxDepth)})
		}
		table(w, []string{"AGENT", "STATE", "LAST SEEN", "LAST ACTIVITY", "LIVE LEASES", "OPEN THREADS", "MAILBOX"}, rows)
	}
	return res, nil
}
