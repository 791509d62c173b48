package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/queue"
)

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
	content, err := r.content.content(c, s)
	if err != nil {
		return nil, err
	}
	var out *inbox.Result
	switch r.verb {
	case "update":
		out, err = s.Update(agent, r.thread, r.status, r.token, content)
	case "done":
		out, err = s.Done(agent, r.thread, r.token, content)
	default:
		out, err = s.Fail(agent, r.thread, r.token, content)
	}
	if err != nil {
		return nil, err
	}
	return statusResult(out), nil
}

// statusResult is the result of a call that moved a thread's status.
func statusResult(out *inbox.Result) *result {
	res := messageResult(out)
	res.human = func(w io.Writer) {
		fmt.Fprintf(w, "%s is now %s (%s: %s)%s\n", out.Thread.ThreadID, out.Thread.Status,
			out.Message.MessageID, out.Message.Summary, replayNote(out))
	}
	return res
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
		if task, err = s.TaskByName(r.name); err != nil {
			return nil, err
		}
	} else if task, err = s.TaskByThread(r.thread); errors.Is(err, inbox.ErrNotFound) {
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
		out, err = queue.Cancel(s, task, agent, r.reason, r.content.key, 2*time.Second)
	} else {
		out, err = s.Cancel(agent, r.thread, inbox.Content{Summary: r.reason, Artifacts: arts, IdempotencyKey: r.content.key})
	}
	if err != nil {
		return nil, err
	}
	return statusResult(out), nil
}
