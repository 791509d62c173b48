package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/queue"
)

var updateCommand = &command{
	name: "update", short: "post progress, or say you are blocked and why",
	long: `Worker step 3: tell the thread where you are. Only the lease holder may
update. --status in_progress posts a progress message. --status blocked
posts a question: the --summary must say exactly what is missing, and the
leader answers with "inbox reply". Then wait for the answer with
"inbox wait-reply" instead of sleeping.`,
	examples: []string{
		`inbox update --agent backend-worker --thread thr_01... --status in_progress --summary "Implementing post CRUD routes" --json`,
		`inbox update --agent backend-worker --thread thr_01... --status blocked --summary "Need auth decision" --payload-json '{"question":"email/password or OAuth for MVP?"}' --json`,
	},
	new: func() runner { return &holderCmd{verb: "update"} },
}

var doneCommand = &command{
	name: "done", short: "finish the thread with its result",
	long: `Worker's last step on success: the holder marks the thread done with a result
message (kind result) addressed to the thread's creator. --summary is
required; put the details in --body, --body-file, --payload-json or
artifacts. The lease is released and the thread is terminal.`,
	examples: []string{
		`inbox done --agent backend-worker --thread thr_01... --summary "Post CRUD implemented" --body-file result.md --artifact patch.diff --artifact-kind patch --json`,
	},
	new: func() runner { return &holderCmd{verb: "done"} },
}

var failCommand = &command{
	name: "fail", short: "give up on the thread, saying why",
	long: `Worker's last step when the work cannot be done: the holder marks the thread
failed with a result message whose --summary says why. The lease is released
and the thread is terminal. Deciding whether to retry belongs to the leader.`,
	examples: []string{`inbox fail --agent backend-worker --thread thr_01... --summary "Tests need a database this machine lacks" --json`},
	new:      func() runner { return &holderCmd{verb: "fail"} },
}

// holderCmd serves update, done and fail: the lease holder's messages.
type holderCmd struct {
	verb    string // update | done | fail
	thread  string
	status  string
	token   int64
	content contentFlags
}

func (r *holderCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("the lease holder (env INBOX_AGENT)")
	fs.StringVar(&r.thread, "thread", "", "thread id (required)")
	summary := map[string]string{
		"update": "what happened; required with --status blocked: say exactly what is missing",
		"done":   "the result in one line (required)",
		"fail":   "why it failed, in one line (required)",
	}[r.verb]
	if r.verb == "update" {
		fs.StringVar(&r.status, "status", "", "in_progress|blocked (required)")
	}
	r.content.register(fs, summary, true)
	fs.Int64Var(&r.token, "lease-token", 0, "refuse unless this is the current lease token (fencing)")
}

func (r *holderCmd) run(c *call) (*result, error) {
	agent, err := c.agentNoArgs()
	if err != nil {
		return nil, err
	}
	if r.thread == "" {
		return nil, usagef("thread", "--thread is required")
	}
	if end, ok := endingCommand[r.status]; r.verb == "update" && ok {
		return nil, usagef("status", "--status %s is not an update: use inbox %s --agent %s --thread %s --%s ... to end the thread (update takes in_progress|blocked)",
			r.status, end[0], agent, r.thread, end[1])
	}
	s, content, err := c.openContent(&r.content)
	if err != nil {
		return nil, err
	}
	var out *inbox.Result
	switch r.verb {
	case "update":
		out, err = s.Update(c.ctx, agent, r.thread, r.status, r.token, content)
	case "done":
		out, err = s.Done(c.ctx, agent, r.thread, r.token, content)
	default:
		out, err = s.Fail(c.ctx, agent, r.thread, r.token, content)
	}
	if err != nil {
		return nil, err
	}
	return statusResult(out), nil
}

// endingCommand is the command that moves a thread to each terminal
// status update refuses, and the flag that says why.
var endingCommand = map[string][2]string{inbox.StatusDone: {"done", "summary"}, inbox.StatusFailed: {"fail", "summary"},
	inbox.StatusCancelled: {"cancel", "reason"}}

// statusResult is the result of a call that moved a thread's status.
func statusResult(out *inbox.Result) *result {
	res := messageResult(out)
	res.human = func(w io.Writer) {
		fmt.Fprintf(w, "%s is now %s (%s: %s)%s\n", out.Thread.ThreadID, out.Thread.Status,
			out.Message.MessageID, inbox.Printable(out.Message.Summary), replayNote(out))
	}
	return res
}

var cancelCommand = &command{
	name: "cancel", short: "stop a thread (leader override)",
	long: `Cancel a live thread: its status becomes cancelled (terminal), any lease is
released, and a control message carrying --reason goes to the assignee, so a
worker waiting with wait-reply wakes up. Any agent may cancel: it is the
leader's override.`,
	examples: []string{`inbox cancel --agent leader --thread thr_01... --reason "Superseded by T9"`},
	new:      func() runner { return &cancelCmd{} },
}

type cancelCmd struct {
	thread, name, reason string
	content              contentFlags
}

func (r *cancelCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("who cancels, usually a leader (env INBOX_AGENT; with --name, default main)")
	fs.StringVar(&r.thread, "thread", "", "thread id (or --name)")
	fs.StringVar(&r.name, "name", "", "the task to cancel, by name (or --thread)")
	fs.StringVar(&r.reason, "reason", "", "why it is cancelled (the message summary)")
	r.content.registerArtifacts(fs)
	fs.StringVar(&r.content.key, "idempotency-key", "", "retry-safe key: repeating the call with it returns the first result and writes nothing")
}

func (r *cancelCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	agent := c.g.agent
	if agent == "" && r.name != "" {
		agent = c.mailAgent()
	}
	if agent == "" {
		return nil, usagef("agent", "--agent is required (or set INBOX_AGENT)")
	}
	switch {
	case r.thread == "" && r.name == "":
		return nil, usagef("thread", "--thread is required (or --name for a task)")
	case r.thread != "" && r.name != "":
		return nil, usagef("name", "give --thread or --name, not both")
	}
	arts, err := r.content.artifactInputs()
	if err != nil {
		return nil, err
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	// A task is cancelled as a task: its process group is killed and its
	// parent gets the failure message.
	var task *inbox.Task
	if r.name != "" {
		if task, err = s.TaskByName(c.ctx, r.name); err != nil {
			return nil, err
		}
	} else if task, err = s.TaskByThread(c.ctx, r.thread); errors.Is(err, inbox.ErrNotFound) {
		task, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out *inbox.Result
	if task != nil {
		if len(arts) > 0 {
			return nil, usagef("artifact", "a task's cancellation carries its partial output; --artifact is for other threads")
		}
		out, err = queue.Cancel(c.ctx, s, task, agent, r.reason, r.content.key, 2*time.Second)
	} else {
		out, err = s.Cancel(c.ctx, agent, r.thread, inbox.Content{Summary: r.reason, Artifacts: arts, IdempotencyKey: r.content.key})
	}
	if err != nil {
		return nil, err
	}
	return statusResult(out), nil
}
