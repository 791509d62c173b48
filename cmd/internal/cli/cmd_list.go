package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

var fetchCommand = &command{
	name: "fetch", short: "list work waiting for an agent (never claims)",
	long: `Worker step 1: see which threads are waiting for you. fetch lists threads
assigned to --agent in the given statuses (default pending,blocked) that no
other agent holds a live lease on: high priority first, then oldest. It
changes nothing and grants nothing; only claim gives you a thread.

--unread keeps only threads with a message from someone else that you have
not marked read (show --mark-read): use it to see which of your blocked
threads got an answer.

Exit 10 (not an error) when nothing is waiting. fetch is the worker's view;
"inbox list" is the leader's filter over all threads.`,
	examples: []string{
		"inbox fetch --agent backend-worker --json",
		"inbox fetch --agent backend-worker --status pending --limit 1 --json",
		"inbox fetch --agent backend-worker --unread",
	},
	new: func() runner { return &fetchCmd{} },
}

type fetchCmd struct {
	statuses []string
	limit    int
	unread   bool
}

func (r *fetchCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("the worker looking for work (env INBOX_AGENT)")
	fs.StringSliceVar(&r.statuses, "status", nil, "statuses to consider, comma-separated (default pending,blocked)")
	fs.IntVar(&r.limit, "limit", inbox.DefaultFetchLimit, "at most this many threads")
	fs.BoolVar(&r.unread, "unread", false, "only threads with a message from someone else past your read cursor")
}

func (r *fetchCmd) run(c *call) (*result, error) {
	agent, err := c.agentNoArgs()
	if err != nil {
		return nil, err
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	ts, err := s.Fetch(c.ctx, agent, r.statuses, r.limit, r.unread)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("threads", ts)
	if len(ts) == 0 {
		res.exit = exitNoWork
		// Nothing for a name never seen here is most likely a typo.
		res.warn(c, s.UnknownAgentWarnings(c.ctx, "agent", agent))
	}
	st := strings.Join(r.statuses, ",")
	if st == "" {
		st = strings.Join(inbox.DefaultFetchStatuses, ",")
	}
	res.human = func(w io.Writer) {
		if len(ts) == 0 {
			fmt.Fprintf(c.env.stderr, "inbox: no candidate threads for %s in %s\n", agent, st)
			return
		}
		table(w, threadHeader, threadRows(ts))
	}
	return res, nil
}

var listCommand = &command{
	name: "list", short: "filter all threads (leader's view)",
	long: `List threads across all agents, newest first, filtered by --status,
--created-by, --assigned-to, --agent (created by or assigned to), --run,
--task and --team (created by or assigned to a member). Unlike
fetch, which shows a worker the work it could claim next (and hides threads
leased by others), list shows every thread that matches, whatever its lease,
and exits 0 even when nothing matches. Mail threads (a note to an agent, not
work: see inbox help send) are left out unless --mail asks for them.`,
	examples: []string{
		"inbox list --status blocked",
		"inbox list --assigned-to backend-worker --status done,failed --limit 10 --json",
		"inbox list --created-by leader",
		"inbox list --mail --agent main   # notes to and from main too",
	},
	new: func() runner { return &listCmd{} },
}

type listCmd struct {
	statuses              []string
	createdBy, assignedTo string
	limit                 int
	mail                  bool
	runID, taskID, team   string
}

func (r *listCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("only threads this agent created or is assigned")
	fs.StringSliceVar(&r.statuses, "status", nil, "statuses, comma-separated (default all)")
	fs.StringVar(&r.createdBy, "created-by", "", "only threads created by this agent")
	fs.StringVar(&r.assignedTo, "assigned-to", "", "only threads assigned to this agent")
	fs.IntVar(&r.limit, "limit", inbox.DefaultListLimit, "at most this many threads")
	fs.BoolVar(&r.mail, "mail", false, "include mail threads (notes, not work), which list leaves out by default")
	fs.StringVar(&r.runID, "run", "", "only threads of this run (send --run)")
	fs.StringVar(&r.taskID, "task", "", "only threads of this task id (send --task)")
	fs.StringVar(&r.team, "team", "", "only threads created by or assigned to a member of this team")
}

func (r *listCmd) run(c *call) (*result, error) {
	s, err := c.openNoArgs()
	if err != nil {
		return nil, err
	}
	f := inbox.ListFilter{CreatedBy: r.createdBy, AssignedTo: r.assignedTo, Statuses: r.statuses, Limit: r.limit, Mail: r.mail,
		RunID: r.runID, TaskID: r.taskID}
	if c.g.agentSet {
		f.Agent = c.g.agent
	}
	if r.team != "" {
		t, err := s.Team(c.ctx, strings.TrimPrefix(r.team, "@"))
		if err != nil {
			return nil, err
		}
		f.Members = append([]string{}, t.Members...)
	}
	ts, err := s.List(c.ctx, f)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("threads", ts)
	res.human = func(w io.Writer) {
		if len(ts) == 0 {
			fmt.Fprintln(c.env.stderr, "inbox: no threads match")
			return
		}
		table(w, threadHeader, threadRows(ts))
	}
	return res, nil
}
