package cli

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
)

var showCommand = &command{
	name: "show", short: "inspect one thread's full history",
	long: `The thread-history inspection command: print one thread with its header,
lease and every message in order, with artifacts. fetch and list only show
headers; show is where you read the conversation. --mark-read moves
--agent's read cursor to the latest message shown, which is what
"fetch --unread" compares against. --seed002 prints each message as a
seed-002 line instead ({"type","from","to","timestamp","content",…}).`,
	examples: []string{
		"inbox show --thread thr_01...",
		"inbox show --thread thr_01... --mark-read --agent backend-worker --json",
	},
	new: func() runner { return &showCmd{} },
}

type showCmd struct {
	thread   string
	markRead bool
	seed002  bool
}

func (r *showCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.thread, "thread", "", "thread id (required)")
	fs.BoolVar(&r.markRead, "mark-read", false, "advance --agent's read cursor to the latest message")
	c.agentFlag("whose read cursor --mark-read advances (env INBOX_AGENT)")
	seed002Flag(fs, &r.seed002)
}

func (r *showCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	if r.thread == "" {
		return nil, usagef("thread", "--thread is required")
	}
	var agent string
	if r.markRead {
		var err error
		if agent, err = c.agentName("agent"); err != nil {
			return nil, usagef("agent", "--mark-read needs --agent (or INBOX_AGENT): whose cursor to move")
		}
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	v, err := s.Show(c.ctx, r.thread)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("thread", v.Thread).set("messages", v.Messages).set("lease", v.Lease)
	if v.Archived {
		res.set("archived", true)
	}
	if v.Origin != nil {
		res.set("origin", v.Origin)
	}
	if r.markRead {
		cur, err := s.MarkRead(c.ctx, agent, r.thread, v.Thread.MessageCount)
		if err != nil {
			return nil, err
		}
		res.set("cursor", cur)
	}
	now := time.Now()
	res.human = func(out io.Writer) {
		// Buffered: a long body is written a line at a time.
		w := bufio.NewWriterSize(out, 64<<10)
		defer w.Flush()
		if v.Archived {
			fmt.Fprintln(w, "(archived: read-only)")
		}
		transcript(w, v, now)
		if r.markRead {
			fmt.Fprintf(w, "\nmarked read for %s up to #%d\n", agent, v.Thread.MessageCount)
		}
	}
	if r.seed002 {
		return asSeed002(c, res)
	}
	return res, nil
}
