package natsbus

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Tasks (SPEC §7). A task is a thread whose first message, kind task,
// carries the prompt and (in its payload, under "task") its definition.
// Its name is the key task.<name> of the store's bucket, naming the
// thread: created (once) before the thread is, which keeps names unique.
// The runner of a running task is the key runner.<name>.

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

// registerTask takes name for thread tid, before the thread is created.
func (b *Bus) registerTask(ctx context.Context, name, tid string) error {
	k := "task." + key(name)
	data, _ := json.Marshal(taskKey{ThreadID: tid})
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	_, err := b.kv.Create(rctx, k, data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, gerr := b.kv.Get(rctx, k)
		if gerr != nil {
			return inbox.Storage(gerr, "register task %s", name)
		}
		var old taskKey
		json.Unmarshal(e.Value(), &old)
		if _, _, serr := b.state(ctx, old.ThreadID); errors.Is(serr, inbox.ErrNotFound) {
			// A name left by a push that never committed: take its place.
			_, err = b.kv.Update(rctx, k, data, e.Revision())
		} else {
			return inbox.Errorf(inbox.ErrInvalidInput, "task_name_taken", "name", "%q is taken by another task; choose another", name)
		}
	}
	return inbox.Storage(err, "register task %s", name)
}

// TaskByName returns a task.
func (b *Bus) TaskByName(ctx context.Context, name string) (*inbox.Task, error) {
	if err := inbox.ValidateAgent("name", name); err != nil {
		return nil, err
	}
	rctx, cancel := b.ctx(ctx)
	e, err := b.kv.Get(rctx, "task."+key(name))
	cancel()
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, inbox.NotFound("task %s not found", name)
	}
	if err != nil {
		return nil, inbox.Storage(err, "read task %s", name)
	}
	var k taskKey
	if json.Unmarshal(e.Value(), &k) != nil || k.ThreadID == "" {
		return nil, inbox.NotFound("task %s not found", name)
	}
	v, err := b.Show(ctx, k.ThreadID)
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
	t.Runner = b.taskRunner(ctx, name)
	return t, nil
}

// Tasks lists the tasks f selects, oldest first.
func (b *Bus) Tasks(ctx context.Context, f inbox.TaskFilter) ([]*inbox.Task, error) {
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	l, err := b.kv.ListKeysFiltered(rctx, "task.*")
	if err != nil {
		return nil, inbox.Storage(err, "list tasks")
	}
	var names []string
	for k := range l.Keys() {
		if raw, err := hex.DecodeString(strings.TrimPrefix(k, "task.")); err == nil {
			names = append(names, string(raw))
		}
	}
	return inbox.TasksIn(ctx, names, f, b.TaskByName)
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
	return inbox.TaskOfThread(ctx, tid, first, b.TaskByName)
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
		if err := ch.idempotent(ctx, "cancel", c.IdempotencyKey); err != nil {
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

// SetTaskRunner records (nil: forgets) the process running a task.
func (b *Bus) SetTaskRunner(ctx context.Context, name string, r *inbox.TaskRunner) error {
	if err := inbox.ValidateAgent("name", name); err != nil {
		return err
	}
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	if r == nil {
		err := b.kv.Delete(rctx, "runner."+key(name))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err = nil
		}
		return inbox.Storage(err, "forget the runner of task %s", name)
	}
	data, _ := json.Marshal(r)
	_, err := b.kv.Put(rctx, "runner."+key(name), data)
	return inbox.Storage(err, "record the runner of task %s", name)
}

func (b *Bus) taskRunner(ctx context.Context, name string) *inbox.TaskRunner {
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	e, err := b.kv.Get(rctx, "runner."+key(name))
	if err != nil {
		return nil
	}
	var r inbox.TaskRunner
	if json.Unmarshal(e.Value(), &r) != nil {
		return nil
	}
	return &r
}

// TaskOutputPath is where a task's output is captured: on the machine
// that runs it, in the user's cache directory.
func (b *Bus) TaskOutputPath(ctx context.Context, name string) (string, error) {
	if err := inbox.ValidateAgent("name", name); err != nil {
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
	return filepath.Join(d, name+".out"), nil
}
