package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

var sendCommand = &command{
	name: "send", args: "[AGENT MESSAGE...]", short: "give an agent work, mail it a note, or add to a thread",
	long: `Work: with --subject (and no --thread), send creates a new thread assigned to
--to, in status pending, whose first message (kind task) you write. That
thread is what the recipient's "inbox fetch" shows until it claims it.

Mail: without --subject, or with a --kind other than task, the message is a
note, not work: it lands in the recipient's mailbox (inbox receive / check /
mailbox) and in no one's fetch. "inbox send AGENT MESSAGE..." is the short
form (from --from, INBOX_AGENT, else main), e.g. a task reporting progress
to its parent.

In a thread: with --thread, send adds a message of any kind to a live
thread; --subject then becomes the message's summary, and --run, --task and
--priority must match the thread's.

The output names the thread id; keep it to watch or answer the thread.`,
	examples: []string{
		`inbox send --from leader --to backend-worker --subject "Add post CRUD routes" --body "Routes under /posts; see docs/api.md" --task T4`,
		`inbox send --from leader --to backend-worker --subject "Hotfix login" --priority high --json`,
		`inbox send "$INBOX_PARENT" "Phase 1 complete"`,
		`inbox send --from leader --thread thr_01... --kind task --body "Also cover DELETE"`,
	},
	new: func() runner { return &sendCmd{} },
}

type sendCmd struct {
	from, to, subject, thread, run_, task, kind, priority string
	content                                               contentFlags
}

func (r *sendCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.from, "from", "", "sender (default --agent / INBOX_AGENT)")
	fs.StringVar(&r.to, "to", "", "recipient; a new thread is assigned to it (default in a thread: the other party)")
	fs.StringVar(&r.subject, "subject", "", "subject of a new work thread; with --thread, the message's summary")
	fs.StringVar(&r.thread, "thread", "", "append to this thread instead of creating one")
	fs.StringVar(&r.run_, "run", "", "run id to record on a new thread")
	fs.StringVar(&r.task, "task", "", "task id to record on a new thread")
	fs.StringVar(&r.kind, "kind", "", "message kind: task|question|answer|progress|result|control|event (default: task with --subject, else progress: mail, not work)")
	fs.StringVar(&r.priority, "priority", "", "priority of a new thread: low|normal|high (default normal)")
	r.content.register(fs, "one-line summary (default: the subject, or the body's first line)", true)
}

func (r *sendCmd) run(c *call) (*result, error) {
	from := r.from
	if from == "" {
		from = c.g.agent
	}
	if len(c.args) > 0 {
		// Seed 003's form: inbox send AGENT MESSAGE, a note to an agent's
		// mailbox from --from, INBOX_AGENT, else main.
		if r.to != "" {
			return nil, usagef("to", "give the recipient as --to or as the first argument, not both")
		}
		if len(c.args) < 2 {
			return nil, usagef("", "inbox send %s MESSAGE: the message is missing", c.args[0])
		}
		if r.content.body != "" || r.content.bodyFile != "" {
			return nil, usagef("body", "give the message as arguments or as --body/--body-file, not both")
		}
		r.to, r.content.body = c.args[0], strings.Join(c.args[1:], " ")
		if from == "" {
			from = c.mailAgent()
		}
	}
	if from == "" {
		return nil, usagef("from", "--from is required (or --agent, or set INBOX_AGENT)")
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	content, err := r.content.content(c, s)
	if err != nil {
		return nil, err
	}
	in := inbox.SendInput{From: from, To: r.to, Subject: r.subject, ThreadID: r.thread, RunID: r.run_,
		TaskID: r.task, Kind: r.kind, Priority: r.priority, Content: content}
	out, err := s.Send(in)
	if err != nil {
		return nil, err
	}
	res := messageResult(out)
	for _, w := range out.Warnings {
		fmt.Fprintf(c.env.stderr, "inbox: warning: %s\n", w)
	}
	res.human = func(w io.Writer) {
		m := out.Message
		switch {
		case r.thread == "" && out.Thread.Mail:
			fmt.Fprintf(w, "mailed %s (a note, not work: it waits in %s's mailbox)\n", out.Thread.AssignedTo, out.Thread.AssignedTo)
		case r.thread == "":
			fmt.Fprintf(w, "created thread %s for %s: %s\n", out.Thread.ThreadID, out.Thread.AssignedTo, out.Thread.Subject)
		}
		fmt.Fprintf(w, "sent %s (%s) %s → %s in %s%s\n", m.MessageID, m.Kind, m.FromAgent, m.ToAgent, m.ThreadID, replayNote(out))
	}
	return res, nil
}

// messageResult is the JSON of a call that wrote a message.
func messageResult(out *inbox.Result) *result {
	res := &result{}
	res.set("thread", out.Thread).set("message", out.Message)
	if out.Lease != nil {
		res.set("lease", out.Lease)
	}
	if out.Replayed {
		res.set("replayed", true)
	}
	if len(out.Warnings) > 0 {
		res.set("warnings", out.Warnings)
	}
	return res
}

func replayNote(out *inbox.Result) string {
	if out.Replayed {
		return " (replayed: this idempotency key was used before; nothing new written)"
	}
	return ""
}
