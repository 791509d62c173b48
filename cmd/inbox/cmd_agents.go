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
		var rows [][]string
		for _, a := range as {
			last := "never acted"
			if a.LastActivity != "" {
				if t, err := time.Parse(time.RFC3339Nano, a.LastActivity); err == nil {
					last = time.Since(t).Round(time.Second).String() + " ago"
				}
			}
			rows = append(rows, []string{a.Agent, last, fmt.Sprint(len(a.LiveLeases)), fmt.Sprint(a.Assigned), fmt.Sprint(a.MailboxDepth)})
		}
		table(w, []string{"AGENT", "LAST ACTIVITY", "LIVE LEASES", "OPEN THREADS", "MAILBOX"}, rows)
	}
	return res, nil
}
