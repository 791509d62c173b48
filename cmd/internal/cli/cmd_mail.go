package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/queue"
)

// mailAgent is the agent whose mailbox or queue a command uses: --agent,
// else INBOX_AGENT, else main.
func (c *call) mailAgent() string {
	if c.g.agent != "" {
		return c.g.agent
	}
	return "main"
}

// reapFor fails the tasks reporting to parent whose runner died, so that
// their failure reaches the mailbox before anyone waits on it.
func reapFor(ctx context.Context, s inbox.Bus, parent string) {
	if tasks, err := s.Tasks(ctx, inbox.TaskFilter{Parent: parent}); err == nil {
		queue.Reap(ctx, s, tasks)
	}
}

// running reports whether tasks reporting to agent are running.
func running(ctx context.Context, s inbox.Bus, agent string) bool {
	tasks, err := s.Tasks(ctx, inbox.TaskFilter{Parent: agent})
	if err != nil {
		return false
	}
	for _, t := range tasks {
		if t.State() == "running" {
			return true
		}
	}
	return false
}

// finishedTask reports whether agent is a task that has finished, with no
// task of its name queued or running: nothing more will come from it.
// Read before the mailbox, it makes that look final: a task's result is
// delivered in the same change that finishes it.
func finishedTask(ctx context.Context, s inbox.Bus, agent string) bool {
	t, err := s.TaskByName(ctx, agent)
	return err == nil && t.State() == "finished"
}

// kindLabel is a message's kind, with its type when it has one.
func kindLabel(m *inbox.Message) string {
	if m.Type != "" {
		return m.Kind + ", " + m.Type
	}
	return m.Kind
}

func mailLine(w io.Writer, m *inbox.Message) {
	fmt.Fprintf(w, "%s → %s [%s] %s  (%s, %s)\n", m.FromAgent, m.ToAgent, kindLabel(m), inbox.Printable(m.Summary), m.ThreadID, shortTime(m.CreatedAt))
	if m.RequestID != "" {
		fmt.Fprintf(w, "  request %s\n", inbox.Printable(m.RequestID))
	}
	if m.AckID != "" && m.Type != inbox.TypeAcknowledgment {
		fmt.Fprintf(w, "  asks for acknowledgment: inbox ack --message %s\n", m.MessageID)
	}
	if m.Body != "" && m.Body != m.Summary {
		for _, l := range strings.Split(strings.TrimRight(m.Body, "\n"), "\n") {
			fmt.Fprintf(w, "  │ %s\n", l)
		}
	}
	if p := string(m.PayloadJSON); p != "" && p != "{}" {
		fmt.Fprintf(w, "  payload: %s\n", inbox.Printable(p))
	}
}

var receiveCommand = &command{
	name: "receive", short: "wait for a message in your mailbox and collect it",
	long: `Your mailbox holds every message addressed to you, in any thread, that you
have not collected. receive blocks until one is there (oldest first; --lifo
newest first; --from only that sender's), collects it and prints it. Each
message is collected once, even when two of your processes receive at the
same time; collected messages stay in their threads (show still has them).
Exit 10 with "woke":false on timeout; 130 or 143 with "interrupted":true
when SIGINT or SIGTERM ends the wait. The agent is --agent, else
INBOX_AGENT, else main. Seed 003's from=ID is --from ID.

Task results arrive here: a finished task's output is a result message from
the task's name to its parent. receive --from a task that has finished, with
nothing of it left in your mailbox, does not wait: exit 10 at once, saying
so ("task_finished":true), since nothing more will come from it.`,
	examples: []string{
		"inbox receive --json",
		"inbox receive --agent main --from analyzer --timeout-seconds 600",
		"inbox receive from=analyzer",
	},
	new: func() runner { return &receiveCmd{} },
}

var checkCommand = &command{
	name: "check", short: "collect every ready message, without waiting",
	long: `Like receive, but never waits: collects and prints every message ready in
your mailbox (oldest first; --lifo newest first; --from one sender's, or
seed 003's from=ID). Exit 10 when there is none.`,
	examples: []string{"inbox check --json", "inbox check --from worker --lifo", "inbox check from=worker"},
	new:      func() runner { return &receiveCmd{all: true} },
}

var mailboxCommand = &command{
	name: "mailbox", short: "look at your mailbox without collecting",
	long: `Show what waits in your mailbox — who sent it and how long ago — without
collecting anything.`,
	examples: []string{"inbox mailbox", "inbox mailbox --agent implementer --json"},
	new:      func() runner { return &receiveCmd{peek: true} },
}

type receiveCmd struct {
	from    string
	lifo    bool
	timeout float64
	all     bool // check: every ready message, without blocking
	peek    bool // mailbox: look, do not collect
	seed002 bool
	// fromGiven: from=ID (seed 003's receive from=b) gave from.
	fromGiven bool
}

func (r *receiveCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("whose mailbox (env INBOX_AGENT, default main)")
	if !r.peek {
		fs.StringVar(&r.from, "from", "", "only messages from this agent")
		fs.BoolVar(&r.lifo, "lifo", false, "newest first instead of oldest first")
	} else {
		fs.StringVar(&r.from, "from", "", "only messages from this agent")
	}
	if !r.all && !r.peek {
		fs.Float64Var(&r.timeout, "timeout-seconds", defaultWaitSeconds, "give up after this long (exit 10); 0 checks once")
	}
	seed002Flag(fs, &r.seed002)
}

// fromWord takes seed 003's from=ID (receive from=b, check from=b) as
// --from; any other argument is refused.
func (r *receiveCmd) fromWord(c *call) error {
	for _, a := range c.args {
		v, ok := strings.CutPrefix(a, "from=")
		switch {
		case !ok:
			return usagef("", "unexpected argument %q (inbox %s takes flags, and from=AGENT as --from; see --help)", a, c.cmd.name)
		case c.fs.Changed("from") || r.fromGiven:
			return usagef("from", "from= gives the sender a second time: give it once, as --from or as from=")
		case v == "":
			return usagef("from", "from= needs a value, as in from=AGENT")
		}
		r.from, r.fromGiven = v, true
	}
	return nil
}

func (r *receiveCmd) run(c *call) (*result, error) {
	if err := r.fromWord(c); err != nil {
		return nil, err
	}
	agent := c.mailAgent()
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return nil, err
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	if !r.peek {
		reapFor(c.ctx, s, agent)
	}
	res := &result{}
	if r.from != "" {
		res.warn(c, s.UnknownAgentWarnings(c.ctx, "from", r.from))
	}
	switch {
	case r.peek:
		items, err := s.Mailbox(c.ctx, agent, r.from)
		if err != nil {
			return nil, err
		}
		msgs := make([]*inbox.Message, len(items))
		for i, it := range items {
			msgs[i] = it.Message
		}
		owed, err := s.Unacknowledged(c.ctx, agent)
		if err != nil {
			return nil, err
		}
		res.set("agent", agent).set("messages", msgs).set("unacknowledged", owed)
		res.human = func(w io.Writer) {
			now := time.Now()
			age := func(m *inbox.Message) string {
				if t, err := time.Parse(time.RFC3339Nano, m.CreatedAt); err == nil {
					return now.Sub(t).Round(time.Second).String()
				}
				return "?"
			}
			if len(msgs) == 0 {
				fmt.Fprintf(w, "%s's mailbox is empty\n", agent)
			} else {
				fmt.Fprintln(w, "Messages:")
			}
			for _, m := range msgs {
				fmt.Fprintf(w, "  - from: %s (received %s ago) [%s] %s\n", m.FromAgent, age(m), kindLabel(m), oneLine(m.Summary, 60))
			}
			if len(owed) > 0 {
				fmt.Fprintln(w, "Not yet acknowledged (inbox ack --message ID):")
				for _, m := range owed {
					fmt.Fprintf(w, "  - %s from %s (%s ago) [%s] %s\n", m.MessageID, m.FromAgent, age(m), kindLabel(m), oneLine(m.Summary, 60))
				}
			}
		}
	case r.all:
		msgs, err := s.Collect(c.ctx, agent, r.from, r.lifo, 0)
		if err != nil {
			return nil, err
		}
		res.set("messages", msgs)
		if len(msgs) == 0 {
			res.exit = exitNoWork
		}
		res.human = func(w io.Writer) {
			if len(msgs) == 0 {
				fmt.Fprintf(c.env.stderr, "inbox: nothing ready for %s\n", agent)
			}
			for _, m := range msgs {
				mailLine(w, m)
			}
		}
	default:
		timeout, err := waitDuration(r.timeout)
		if err != nil {
			return nil, err
		}
		if r.from != "" {
			if err := inbox.ValidateAgent("from", r.from); err != nil {
				return nil, err
			}
		}
		ctx, stop, in := c.waitContext()
		defer stop()
		opt := c.waitOptions(timeout)
		if running(ctx, s, agent) {
			// A runner dying announces nothing: while the agent's tasks
			// run, check on their runners every second.
			opt.Every, opt.Tick = time.Second, func() { reapFor(ctx, s, agent) }
		}
		finished := r.from != "" && finishedTask(ctx, s, r.from)
		if finished {
			// Its result was delivered when it finished: one look at the
			// mailbox, now, is the last word.
			opt.Timeout = 0
		}
		// What it waits on is recorded for the wait graph once a first
		// look (Timeout 0) found nothing: mail already there costs
		// nothing more.
		full := opt.Timeout
		opt.Timeout = 0
		m, err := s.Receive(ctx, agent, r.from, r.lifo, opt)
		if m == nil && err == nil && full > 0 && ctx.Err() == nil {
			defer s.WaitingOn(ctx, inbox.WaitInfo{Agent: agent, Reason: inbox.WaitOnReceive, From: r.from})()
			opt.Timeout = full
			m, err = s.Receive(ctx, agent, r.from, r.lifo, opt)
		}
		if m == nil && interrupted(in, err) {
			return c.interruptedResult(in, -1, "before a message came for "+agent), nil
		}
		if err != nil {
			return nil, err
		}
		res.set("woke", m != nil).set("message", m)
		if m == nil {
			res.exit = exitNoWork
			if finished {
				res.set("task_finished", true)
			}
		}
		res.human = func(w io.Writer) {
			switch {
			case m == nil && finished:
				fmt.Fprintf(c.env.stderr, "inbox: task %s finished and nothing from it waits for %s: nothing more will come from it\n", r.from, agent)
				return
			case m == nil:
				fmt.Fprintf(c.env.stderr, "inbox: no message for %s within %gs\n", agent, r.timeout)
				return
			}
			mailLine(w, m)
		}
	}
	if r.seed002 {
		return asSeed002(c, res)
	}
	return res, nil
}

// sendNote sends in, the note of seed 003's "inbox send AGENT MESSAGE":
// from inside a task (INBOX_THREAD names its thread) to the task's
// parent, it is a progress message in the task's own thread, so that the
// task's story (show --thread) reads prompt, notes, result; the parent's
// mailbox gets it as any mail (SPEC §7). Any other note (to a sibling,
// from outside a task, typed, or once the task finished) is a mail thread
// of its own, as before. task is the task whose thread took the note.
func (c *call) sendNote(s inbox.Bus, in inbox.SendInput) (out *inbox.Result, task *inbox.Task, err error) {
	tid := c.env.getenv("INBOX_THREAD")
	if tid != "" && in.ThreadID == "" && in.Subject == "" && (in.Kind == "" || in.Kind == inbox.KindProgress) &&
		in.Type == "" && in.RunID == "" && in.TaskID == "" && in.Priority == "" {
		t, terr := s.TaskByThread(c.ctx, tid)
		if terr == nil && t.Name == in.From && t.Parent == in.To && t.State() == "running" {
			note := in
			note.ThreadID, note.Kind = tid, inbox.KindProgress
			out, err = s.Send(c.ctx, note)
			if !errors.Is(err, inbox.ErrInvalidState) {
				return out, t, err
			}
			// The task finished meanwhile: a note of its own.
		}
	}
	out, err = s.Send(c.ctx, in)
	return out, nil, err
}
