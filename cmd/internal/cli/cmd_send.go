package cli

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

Several recipients: --to a,b (or --to repeated) or --to @team (every member
of the team but you; "inbox team create"). The message is stored once and
lands in each recipient's mailbox; a new work thread is assigned to none of
them and shows in each one's fetch until one claims it (exactly one wins).

Teams (seed 002's protocol): --type gives the message a type
(task_assignment, task_status_request, message, team_broadcast, …) and
--content-json its content (a JSON object, stored as the payload). A
task_assignment is work (kind task, its subject from --subject or the
content's "subject"); other types are mail unless --kind says otherwise.
--ack-required asks each recipient to acknowledge (inbox ack); --request
(or --request-id R) makes it a request whose response wait-reply
--request-id waits for. --seed002 LINE sends a seed-002 JSON line as it is
({"type","from","to","timestamp","content",…}).

The output names the thread id; keep it to watch or answer the thread.`,
	examples: []string{
		`inbox send --from leader --to backend-worker --subject "Add post CRUD routes" --body "Routes under /posts; see docs/api.md" --task T4`,
		`inbox send --from leader --to backend-worker --subject "Hotfix login" --priority high --json`,
		`inbox send "$INBOX_PARENT" "Phase 1 complete"`,
		`inbox send --from leader --thread thr_01... --kind task --body "Also cover DELETE"`,
		`inbox send --from coordinator --to @team-alpha --type team_broadcast --content-json '{"text":"Daily standup in 30 minutes"}'`,
		`inbox send --from coordinator --to backend-dev --type task_assignment --ack-required --content-json '{"taskId":"a1b2","subject":"Implement user authentication API","priority":4}'`,
	},
	new: func() runner { return &sendCmd{} },
}

type sendCmd struct {
	from, subject, thread, run_, task, kind, priority, seed002 string
	to                                                         []string
	content                                                    contentFlags
	typed                                                      typedFlags
}

func (r *sendCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.from, "from", "", "sender (default --agent / INBOX_AGENT)")
	fs.StringArrayVar(&r.to, "to", nil, "recipient: an agent, several (a,b; repeatable) or a team (@team); a new thread is assigned to a single one (default in a thread: the other party)")
	fs.StringVar(&r.subject, "subject", "", "subject of a new work thread; with --thread, the message's summary")
	fs.StringVar(&r.thread, "thread", "", "append to this thread instead of creating one")
	fs.StringVar(&r.run_, "run", "", "run id to record on a new thread")
	fs.StringVar(&r.task, "task", "", "task id to record on a new thread")
	fs.StringVar(&r.kind, "kind", "", "message kind: task|question|answer|progress|result|control|event (default: task with --subject, else progress: mail, not work)")
	fs.StringVar(&r.priority, "priority", "", "priority of a new thread: low|normal|high (default normal)")
	r.content.register(fs, "one-line summary (default: the subject, or the body's first line)", true)
	r.typed.register(fs, true)
	fs.StringVar(&r.seed002, "seed002", "", `send a seed-002 line as it is: {"type","from","to","timestamp","content",...}`)
}

func (r *sendCmd) run(c *call) (*result, error) {
	from := c.sender(r.from)
	if len(c.args) > 0 {
		// Seed 003's form: inbox send AGENT MESSAGE, a note to an agent's
		// mailbox from --from, INBOX_AGENT, else main.
		if len(r.to) > 0 {
			return nil, usagef("to", "give the recipient as --to or as the first argument, not both")
		}
		if len(c.args) < 2 {
			return nil, usagef("", "inbox send %s MESSAGE: the message is missing", c.args[0])
		}
		if r.content.body != "" || r.content.bodyFile != "" {
			return nil, usagef("body", "give the message as arguments or as --body/--body-file, not both")
		}
		r.to, r.content.body = []string{c.args[0]}, strings.Join(c.args[1:], " ")
		if from == "" {
			from = c.mailAgent()
		}
	}
	var line *inbox.Seed002
	if c.fs.Changed("seed002") {
		for _, n := range []string{"to", "type", "content-json", "payload-json", "body", "body-file", "request-id", "request", "ack-required"} {
			if c.fs.Changed(n) {
				return nil, usagef("seed002", "--seed002 carries the whole message: leave out --%s", n)
			}
		}
		if len(c.args) > 0 {
			return nil, usagef("seed002", "--seed002 carries the whole message: leave out the arguments")
		}
		var err error
		if line, err = inbox.ParseSeed002([]byte(r.seed002)); err != nil {
			return nil, err
		}
		if r.from != "" && r.from != line.From {
			return nil, usagef("from", "--from %s differs from the line's from %q: leave --from out", r.from, line.From)
		}
		from, r.to = line.From, []string{line.To}
	}
	if err := requireSender(from); err != nil {
		return nil, err
	}
	s, content, err := c.openContent(&r.content)
	if err != nil {
		return nil, err
	}
	if line != nil {
		lc := line.SendContent()
		lc.Summary, lc.Artifacts, lc.IdempotencyKey = orDefault(content.Summary, lc.Summary), content.Artifacts, content.IdempotencyKey
		content = lc
	} else if err := r.typed.apply(c, &content); err != nil {
		return nil, err
	}
	in := inbox.SendInput{From: from, To: strings.Join(r.to, ","), Subject: r.subject, ThreadID: r.thread, RunID: r.run_,
		TaskID: r.task, Kind: r.kind, Priority: r.priority, Content: content}
	var out *inbox.Result
	var task *inbox.Task // the task whose thread took a note to its parent
	if len(c.args) > 0 {
		out, task, err = c.sendNote(s, in)
	} else {
		out, err = s.Send(c.ctx, in)
	}
	if err != nil {
		return nil, err
	}
	res := messageResult(out)
	c.printWarnings(out.Warnings)
	res.human = func(w io.Writer) {
		m := out.Message
		to := m.ToAgent
		if len(m.Recipients) > 0 {
			to = strings.Join(m.Recipients, ", ")
		}
		switch {
		case task != nil:
			fmt.Fprintf(w, "mailed %s a note (%s in %s, task %s's thread): it waits in %s's mailbox, not in anyone's fetch%s\n", to, m.MessageID, m.ThreadID, task.Name, to, replayNote(out))
			return
		case r.thread == "" && out.Thread.Mail:
			// Mail is one line: what it is and where it waits, not a
			// thread created and a message of kind progress.
			what, where := "a note", to+"'s mailbox"
			if m.Type != "" {
				what = "a " + m.Type
			}
			if len(m.Recipients) > 0 {
				where = "each one's mailbox"
			}
			fmt.Fprintf(w, "mailed %s %s (%s in %s): it waits in %s, not in anyone's fetch%s\n", to, what, m.MessageID, m.ThreadID, where, replayNote(out))
		case r.thread == "" && len(m.Recipients) > 0:
			fmt.Fprintf(w, "created thread %s offered to %s (the first to claim it takes it): %s\n", out.Thread.ThreadID, to, inbox.Printable(out.Thread.Subject))
		case r.thread == "":
			fmt.Fprintf(w, "created thread %s for %s: %s\n", out.Thread.ThreadID, out.Thread.AssignedTo, inbox.Printable(out.Thread.Subject))
		}
		if r.thread != "" || !out.Thread.Mail {
			kind := m.Kind
			if m.Type != "" {
				kind += ", " + m.Type
			}
			fmt.Fprintf(w, "sent %s (%s) %s → %s in %s%s\n", m.MessageID, kind, m.FromAgent, m.ToAgent, m.ThreadID, replayNote(out))
		}
		if m.RequestID != "" {
			fmt.Fprintf(w, "request %s: wait for its response with inbox wait-reply --thread %s --request-id %s\n", m.RequestID, m.ThreadID, m.RequestID)
		}
		if m.AckID != "" {
			fmt.Fprintf(w, "acknowledgment asked of %s (inbox ack --message %s)\n", to, m.MessageID)
		}
	}
	return res, nil
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// messageResult is the JSON of a call that wrote a message.
func messageResult(out *inbox.Result) *result {
	releaseLarge(out.Message)
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

// sender is who sends a message: from (--from), else --agent or
// INBOX_AGENT, else "".
func (c *call) sender(from string) string {
	if from == "" {
		return c.g.agent
	}
	return from
}

// requireSender refuses a message without a sender.
func requireSender(from string) error {
	if from == "" {
		return usagef("from", "--from is required (or --agent, or set INBOX_AGENT)")
	}
	return nil
}

func replayNote(out *inbox.Result) string {
	if out.Replayed {
		return " (replayed: this idempotency key was used before; nothing new written)"
	}
	return ""
}
