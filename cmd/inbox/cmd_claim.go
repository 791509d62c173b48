package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

// claimCmd serves claim and renew.
type claimCmd struct {
	renew   bool
	thread  string
	seconds int
	token   int64
}

func (r *claimCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("the agent taking the lease (env INBOX_AGENT)")
	fs.StringVar(&r.thread, "thread", "", "thread id (required)")
	fs.IntVar(&r.seconds, "lease-seconds", inbox.DefaultLeaseSeconds, "lease length in seconds, counted from now")
	if r.renew {
		fs.Int64Var(&r.token, "lease-token", 0, "refuse unless this is the current lease token")
	}
}

func (r *claimCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	agent, err := c.agentName("agent")
	if err != nil {
		return nil, err
	}
	if r.thread == "" {
		return nil, usagef("thread", "--thread is required")
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	var out *inbox.Result
	if r.renew {
		out, err = s.Renew(agent, r.thread, r.seconds, r.token)
	} else {
		out, err = s.Claim(agent, r.thread, r.seconds)
	}
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("thread", out.Thread).set("lease", out.Lease)
	res.human = func(w io.Writer) {
		verb := "claimed"
		if r.renew {
			verb = "renewed lease on"
		}
		fmt.Fprintf(w, "%s %s for %s: lease token %d until %s\n", verb, out.Thread.ThreadID, agent,
			out.Lease.LeaseToken, out.Lease.ExpiresAt)
	}
	return res, nil
}
