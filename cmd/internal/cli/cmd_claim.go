package cli

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

var claimCommand = &command{
	name: "claim", short: "take the lease on a thread before working on it",
	long: `Worker step 2: own a thread. claim gives --agent the thread's lease for
--lease-seconds (default 900): the status becomes claimed and assigned_to
becomes you. Only one agent holds a live lease; a second claimer gets exit 20
(lease_conflict). Claiming a thread whose lease expired succeeds, and the
holder may claim again.

Each claim returns a lease_token that is larger than every earlier one on the
thread. Pass it as --lease-token to update, renew, done and fail so that a
worker whose lease was taken over is refused (exit 20) instead of
overwriting the new holder's work. Renew before the lease runs out.`,
	examples: []string{
		"inbox claim --agent backend-worker --thread thr_01... --json",
		"inbox claim --agent backend-worker --thread thr_01... --lease-seconds 1800",
	},
	new: func() runner { return &claimCmd{} },
}

var renewCommand = &command{
	name: "renew", short: "extend your lease",
	long: `Extend the lease you hold to --lease-seconds from now (default 900). Only the
holder may renew, and only while the lease is live; after it expires, claim
again. With --lease-token, a stale token is refused with exit 20.`,
	examples: []string{"inbox renew --agent backend-worker --thread thr_01... --lease-seconds 900 --lease-token 3"},
	new:      func() runner { return &claimCmd{renew: true} },
}

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
	agent, err := c.agentNoArgs()
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
		out, err = s.Renew(c.ctx, agent, r.thread, r.seconds, r.token)
	} else {
		out, err = s.Claim(c.ctx, agent, r.thread, r.seconds)
	}
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("thread", out.Thread).set("lease", out.Lease)
	res.warn(c, out.Warnings)
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
