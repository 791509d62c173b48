package natsbus

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Tasks (SPEC §7). A task is a thread whose first message, kind task,
// carries the prompt and (in its payload, under "task") its definition.
// Its name is the key task.<name> of the store's bucket, naming the
// thread: created before the thread is, which keeps the names of live
// (queued or running) tasks unique. A finished task gives its name up
// (SPEC §7 "Task names"): the push that takes it again first records the
// finished task in the history, the key taskdone.<name>.<thread>, then
// updates task.<name> with a compare-and-set on its revision, so of two
// pushes racing for the name one wins and the other finds it taken. The
// runner of a running task is the key runner.<name>.

type taskKey struct {
	ThreadID string `json:"thread_id"`
}

// Push queues a task in spec.Owner's queue (default "main")
// (inbox.PushTask).
func (b *Bus) Push(ctx context.Context, spec inbox.TaskSpec, prompt string) (*inbox.Task, error) {
	return inbox.PushTask(spec, prompt, func(spec inbox.TaskSpec, in inbox.SendInput) (*inbox.Thread, error) {
		res, err := b.sendNew(ctx, in, spec.Name, spec.Owner)
		if err != nil {
			return nil, err
		}
		return res.Thread, nil
	})
}

// pushGrace is how long a name registered for a thread that does not
// exist yet is another push's, between its registration and its thread's
// creation, rather than one a push left when it failed.
const pushGrace = 30 * time.Second

// doneKey is the history's key for the finished task name of thread tid.
func doneKey(name, tid string) string { return "taskdone." + key(name) + "." + tid }

// registerTask takes name for thread tid, before the thread is created.
func (b *Bus) registerTask(ctx context.Context, name, tid string) error {
	k := "task." + key(name)
	data, _ := json.Marshal(taskKey{ThreadID: tid})
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	_, err := b.kv.Create(rctx, k, data)
	for attempt := 0; errors.Is(err, jetstream.ErrKeyExists) && attempt < 100; attempt++ {
		e, gerr := b.kv.Get(rctx, k)
		if errors.Is(gerr, jetstream.ErrKeyNotFound) {
			_, err = b.kv.Create(rctx, k, data)
			continue
		}
		if gerr != nil {
			return inbox.Storage(gerr, "register task %s", name)
		}
		var old taskKey
		json.Unmarshal(e.Value(), &old)
		r, _, serr := b.state(ctx, old.ThreadID)
		switch {
		case errors.Is(serr, inbox.ErrNotFound) && time.Since(e.Created()) < pushGrace:
			return inbox.Errorf(inbox.ErrInvalidInput, "task_name_taken", "name",
				"%q is taken by a task being pushed right now; choose another", name)
		case errors.Is(serr, inbox.ErrNotFound):
			// A name left by a push that never committed: take its place.
		case serr != nil:
			return serr
		case !inbox.IsTerminal(r.Thread.Status):
			state := "running"
			if r.Thread.Status == inbox.StatusPending && r.Lease == nil {
				state = "queued" // never started (inbox.Task.State)
			}
			return inbox.Errorf(inbox.ErrInvalidInput, "task_name_taken", "name",
				"%q is taken by a task that is %s (%s); a name is free again once its task finished: choose another, or wait", name, state, old.ThreadID)
		default:
			// Finished: into the history, then the name is free.
			if _, err := b.kv.Put(rctx, doneKey(name, old.ThreadID), e.Value()); err != nil {
				return inbox.Storage(err, "keep finished task %s", name)
			}
		}
		_, err = b.kv.Update(rctx, k, data, e.Revision())
		if isWrongRevision(err) {
			err = jetstream.ErrKeyExists // another push came first: look again
		}
	}
	return inbox.Storage(err, "register task %s", name)
}

// isWrongRevision reports whether err is a lost compare-and-set of a key.
func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// TaskByName returns the task of that name that is queued or running,
// else the newest that finished.
func (b *Bus) TaskByName(ctx context.Context, name string) (*inbox.Task, error) {
	if err := inbox.ValidateAgent("name", name); err != nil {
		return nil, err
	}
	rctx, cancel := b.ctx(ctx)
	e, err := b.kv.Get(rctx, "task."+key(name))
	cancel()
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, inbox.Storage(err, "read task %s", name)
	}
	if err == nil {
		var k taskKey
		json.Unmarshal(e.Value(), &k)
		t, err := b.taskOf(ctx, name, k.ThreadID)
		if !errors.Is(err, inbox.ErrNotFound) {
			if err == nil {
				t.Runner = b.taskRunner(ctx, t) // forgotten a moment after its task ends
			}
			return t, err
		}
	}
	// No live task: the push that took the name last never committed.
	hist, err := b.finishedOf(ctx, name)
	if err != nil {
		return nil, err
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if t, err := b.taskOf(ctx, name, hist[i]); !errors.Is(err, inbox.ErrNotFound) {
			return t, err
		}
	}
	return nil, inbox.NotFound("task %s not found", name)
}

// finishedOf lists the threads of name's history, oldest first.
func (b *Bus) finishedOf(ctx context.Context, name string) ([]string, error) {
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	l, err := b.kv.ListKeysFiltered(rctx, "taskdone."+key(name)+".*")
	if err != nil {
		return nil, inbox.Storage(err, "list finished tasks %s", name)
	}
	var tids []string
	for k := range l.Keys() {
		tids = append(tids, k[strings.LastIndexByte(k, '.')+1:])
	}
	slices.Sort(tids)
	return tids, nil
}

// taskOf reads the task name of thread tid: inbox.ErrNotFound when the
// thread does not exist (its push never committed) or is not that task.
func (b *Bus) taskOf(ctx context.Context, name, tid string) (*inbox.Task, error) {
	if tid == "" {
		return nil, inbox.NotFound("task %s not found", name)
	}
	v, err := b.Show(ctx, tid)
	if errors.Is(err, inbox.ErrNotFound) {
		return nil, inbox.NotFound("task %s not found", name) // the push never committed
	}
	if err != nil {
		return nil, err
	}
	if len(v.Messages) == 0 {
		return nil, inbox.NotFound("task %s not found", name)
	}
	first := v.Messages[0]
	var p struct {
		Task inbox.TaskSpec `json:"task"`
	}
	if err := json.Unmarshal(first.PayloadJSON, &p); err != nil || p.Task.Name != name {
		return nil, inbox.NotFound("task %s not found", name)
	}
	t := &inbox.Task{TaskSpec: p.Task, Prompt: first.Body, ThreadID: v.Thread.ThreadID, Status: v.Thread.Status,
		CreatedAt: v.Thread.CreatedAt, UpdatedAt: v.Thread.UpdatedAt}
	if t.Owner == "" {
		t.Owner = t.Parent
	}
	if v.Lease != nil {
		t.StartedAt, t.LeaseToken = v.Lease.ClaimedAt, v.Lease.LeaseToken
	}
	return t, nil
}

// Tasks lists the tasks f selects, oldest first: each name's live or
// newest finished task, and the finished tasks in the names' history.
func (b *Bus) Tasks(ctx context.Context, f inbox.TaskFilter) ([]*inbox.Task, error) {
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	l, err := b.kv.ListKeysFiltered(rctx, "task.*", "taskdone.*.*")
	if err != nil {
		return nil, inbox.Storage(err, "list tasks")
	}
	// A name, or "name\x00thread" for a task in the history (no name
	// holds a NUL).
	var keys []string
	for k := range l.Keys() {
		parts := strings.Split(k, ".")
		raw, err := hex.DecodeString(parts[1])
		switch {
		case err != nil:
		case parts[0] == "task" && len(parts) == 2:
			keys = append(keys, string(raw))
		case parts[0] == "taskdone" && len(parts) == 3:
			keys = append(keys, string(raw)+"\x00"+parts[2])
		}
	}
	tasks, err := inbox.TasksIn(ctx, keys, f, func(ctx context.Context, k string) (*inbox.Task, error) {
		if name, tid, ok := strings.Cut(k, "\x00"); ok {
			return b.taskOf(ctx, name, tid)
		}
		return b.TaskByName(ctx, k)
	})
	// A task both live and in the history: a push cut off between the
	// two keys, or a name whose newest push never committed.
	return slices.CompactFunc(tasks, func(x, y *inbox.Task) bool { return x.ThreadID == y.ThreadID }), err
}

// TaskByThread returns the task whose thread tid is.
func (b *Bus) TaskByThread(ctx context.Context, tid string) (*inbox.Task, error) {
	if err := inbox.ValidateID("thread", tid); err != nil {
		return nil, err
	}
	v, err := b.Show(ctx, tid)
	if err != nil {
		return nil, err
	}
	var first *inbox.Message
	if len(v.Messages) > 0 {
		first = v.Messages[0]
	}
	// The name's live task, or this thread's in the name's history.
	return inbox.TaskOfThread(ctx, tid, first, func(ctx context.Context, name string) (*inbox.Task, error) {
		if t, err := b.TaskByName(ctx, name); err != nil || t.ThreadID == tid {
			return t, err
		}
		rctx, cancel := b.ctx(ctx)
		defer cancel()
		if _, err := b.kv.Get(rctx, doneKey(name, tid)); err != nil {
			return nil, inbox.NotFound("task %s not found", name)
		}
		return b.taskOf(ctx, name, tid)
	})
}

// CancelTask cancels a task that has not finished.
func (b *Bus) CancelTask(ctx context.Context, agent string, t *inbox.Task, c inbox.Content) (*inbox.Result, error) {
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return nil, err
	}
	m0, err := b.message(ctx, b.now(), t.Name, t.Parent, inbox.KindResult, c, "task "+t.Name+" cancelled by "+agent)
	if err != nil {
		return nil, err
	}
	m0.Status = inbox.StatusCancelled
	return b.mutateResult(ctx, t.ThreadID, func(ch *change) error {
		if err := ch.idempotent(ctx, "cancel", c.IdempotencyKey, inbox.CancelTaskArgs(agent, c)); err != nil {
			return err
		}
		if inbox.IsTerminal(ch.r.Thread.Status) {
			return inbox.InvalidState("task %s already finished (%s); there is nothing to cancel", t.Name, ch.r.Thread.Status)
		}
		m := *m0
		ch.transition(agent, inbox.StatusCancelled, inbox.EventThreadCancelled, &m)
		var p map[string]any
		json.Unmarshal(ch.r.Event.PayloadJSON, &p)
		p["cancelled_by"] = agent
		ch.r.Event.PayloadJSON, _ = json.Marshal(p)
		return nil
	})
}

// A task's runner record is its run's, the key runner.<name>.<thread>,
// and so is its output capture (<name>.<thread>.out): a runner tidying up
// after its task finished never touches those of the task that took the
// name next.

// runnerKey is the key of the runner record of task name's run in thread
// tid.
func runnerKey(name, tid string) string { return "runner." + key(name) + "." + tid }

// SetTaskRunner records the process running task name, the name's live
// task. With r nil it forgets the records of the name's tasks that have
// finished; a running task's record stays, for Reap to judge.
func (b *Bus) SetTaskRunner(ctx context.Context, name string, r *inbox.TaskRunner) error {
	if err := inbox.ValidateAgent("name", name); err != nil {
		return err
	}
	t, err := b.TaskByName(ctx, name)
	if r == nil {
		var gone []string
		if err == nil && t.State() == "finished" {
			gone = append(gone, runnerKey(name, t.ThreadID), "runner."+key(name))
		}
		hist, _ := b.finishedOf(ctx, name) // only finished tasks are there
		for _, tid := range hist {
			gone = append(gone, runnerKey(name, tid))
		}
		rctx, cancel := b.ctx(ctx)
		defer cancel()
		for _, k := range gone {
			if err := b.kv.Delete(rctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				return inbox.Storage(err, "forget the runner of task %s", name)
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	data, _ := json.Marshal(r)
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	_, err = b.kv.Put(rctx, runnerKey(name, t.ThreadID), data)
	return inbox.Storage(err, "record the runner of task %s", name)
}

// taskRunner reads the runner record of t's run, nil when there is none.
func (b *Bus) taskRunner(ctx context.Context, t *inbox.Task) *inbox.TaskRunner {
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	e, err := b.kv.Get(rctx, runnerKey(t.Name, t.ThreadID))
	legacy := errors.Is(err, jetstream.ErrKeyNotFound)
	if legacy {
		e, err = b.kv.Get(rctx, "runner."+key(t.Name))
	}
	var r inbox.TaskRunner
	if err != nil || json.Unmarshal(e.Value(), &r) != nil {
		return nil
	}
	if legacy && !r.Runs(t) {
		return nil
	}
	return &r
}

// TaskOutputPath is where the output of task name (its live task) is
// captured: on the machine that runs it, in the user's cache directory.
func (b *Bus) TaskOutputPath(ctx context.Context, name string) (string, error) {
	t, err := b.TaskByName(ctx, name)
	if err != nil {
		return "", err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	d := filepath.Join(dir, "inbox", "nats-"+b.name, "tasks")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", inbox.Storage(err, "create %s", d)
	}
	return filepath.Join(d, name+"."+t.ThreadID+".out"), nil
}

// StartTask claims task t's thread for its run, as the task's name, if
// it was never claimed (inbox.StartLease): the change is a
// compare-and-set on the thread's record, so of racing starts exactly one
// finds it unclaimed. The claim reads the prompt, as any claim reads what
// it was sent.
func (b *Bus) StartTask(ctx context.Context, t *inbox.Task, leaseSeconds int) (*inbox.Result, error) {
	if err := inbox.CheckLeaseArgs(t.Name, t.ThreadID, leaseSeconds); err != nil {
		return nil, err
	}
	return b.readResult(ctx, t.Name)(b.mutateResult(ctx, t.ThreadID, func(c *change) error {
		th := &c.r.Thread
		l, err := inbox.StartLease(th, c.r.Lease, t.Name, leaseSeconds, c.now)
		if err != nil {
			return err
		}
		c.r.Lease = &l
		th.Status, th.AssignedTo = inbox.StatusClaimed, t.Name
		c.r.Event = inbox.Event{EventType: inbox.EventThreadClaimed, Agent: t.Name, Summary: "claimed by " + t.Name,
			PayloadJSON: leasePayload(&l)}
		c.readAll(t.Name)
		return nil
	}))
}
