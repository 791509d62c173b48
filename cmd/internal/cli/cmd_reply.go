package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

var replyCommand = &command{
	name: "reply", short: "answer or comment inside a thread (anyone)",
	long: `Append a message to a live thread; anyone may reply. This is how a leader
answers a blocked worker (--kind answer), steers it (--kind control), or how
anyone asks a follow-up (--kind question) or notes progress. --to defaults to
the other party of the thread (for a thread offered to several agents and
claimed by none: all of them); it takes several agents (a,b, or --to
repeated) or a team (@team) like send. reply never changes the thread's
status.

Typed replies (seed 002): --type task_status_response --content-json '{…}'
--request-id R answers the request R (its sender's wait-reply --request-id R
wakes). With --type and no --kind, the kind follows the type (a status
response is an answer; others are progress).`,
	examples: []string{
		`inbox reply --from leader --thread thr_01... --kind answer --summary "Use email/password for MVP" --body "Keep it simple for now." --json`,
		`inbox reply --from backend-dev --thread thr_01... --type task_status_response --request-id req-98765 --content-json '{"taskId":"a1b2","status":"in_progress","progress":60}'`,
	},
	new: func() runner { return &replyCmd{} },
}

type replyCmd struct {
	from, thread, kind string
	to                 []string
	content            contentFlags
	typed              typedFlags
}

func (r *replyCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.from, "from", "", "sender (default --agent / INBOX_AGENT)")
	fs.StringArrayVar(&r.to, "to", nil, "recipient: an agent, several (a,b; repeatable) or a team (@team) (default: the other party of the thread)")
	fs.StringVar(&r.thread, "thread", "", "thread to reply in (required)")
	fs.StringVar(&r.kind, "kind", "", "answer|question|progress|control (required without --type)")
	r.content.register(fs, "one-line summary (default: the body's first line)", true)
	r.typed.register(fs, false)
}

func (r *replyCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	from := c.sender(r.from)
	if err := requireSender(from); err != nil {
		return nil, err
	}
	if r.thread == "" {
		return nil, usagef("thread", "--thread is required")
	}
	s, content, err := c.openContent(&r.content)
	if err != nil {
		return nil, err
	}
	if err := r.typed.apply(c, &content); err != nil {
		return nil, err
	}
	out, err := s.Reply(c.ctx, from, strings.Join(r.to, ","), r.thread, r.kind, content)
	if err != nil {
		return nil, err
	}
	res := messageResult(out)
	c.printWarnings(out.Warnings)
	res.human = func(w io.Writer) {
		m := out.Message
		fmt.Fprintf(w, "replied %s (%s) %s → %s in %s%s\n", m.MessageID, m.Kind, m.FromAgent, m.ToAgent, m.ThreadID, replayNote(out))
	}
	return res, nil
}
