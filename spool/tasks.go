package spool

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// The task queue (SPEC §7). A queued task is a thread from its parent to
// the task's name (the sub-agent's identity) whose first message, kind
// task, carries the prompt, with the task's definition in its payload under
// "task". Its name is registered as tasks/<name>.json, a hard link to that
// first message made before the commit point: the link fails when the name
// is taken, which keeps task names unique. Thread status is the task's
// state: pending is queued, claimed or in_progress is running, terminal is
// finished.

func (s *Store) taskPath(name string) string { return filepath.Join(s.dir, tasksDir, name+".json") }

// registerTask links src (a new thread's first message) as the task name.
func (s *Store) registerTask(ctx context.Context, name, src string) error {
	p := s.taskPath(name)
	err := os.Link(src, p)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(filepath.Dir(p), s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return inbox.Storage(err, "create task registry")
		}
		err = os.Link(src, p)
	}
	if errors.Is(err, fs.ErrExist) {
		if _, err := s.TaskByName(ctx, name); errors.Is(err, inbox.ErrNotFound) {
			// A link left by a push that never committed: take its place.
			os.Remove(p)
			err = os.Link(src, p)
		} else {
			return inbox.Errorf(inbox.ErrInvalidInput, "task_name_taken", "name", "%q is taken by another task; choose another", name)
		}
	}
	return inbox.Storage(err, "register task %s", name)
}

// Push queues a task in spec.Owner's queue (default "main"): it returns at
// once. A name is generated when spec.Name is empty; the parent, who gets
// the result, defaults to the owner (inbox.PushTask).
func (s *Store) Push(ctx context.Context, spec inbox.TaskSpec, prompt string) (*inbox.Task, error) {
	return inbox.PushTask(spec, prompt, func(spec inbox.TaskSpec, in inbox.SendInput) (*inbox.Thread, error) {
		t, _, err := s.prepareThread(ctx, in)
		if err != nil {
			return nil, err
		}
		t.taskName = spec.Name
		t.ev.EventType = inbox.EventThreadCreated
		err = t.commit(ctx)
		t.msg.discardBlobs()
		if err != nil {
			return nil, err
		}
		s.seen(spec.Owner)
		return &t.h.Thread, nil
	})
}

// TaskByName returns a task.
func (s *Store) TaskByName(ctx context.Context, name string) (*inbox.Task, error) {
	if err := inbox.ValidateAgent("name", name); err != nil {
		return nil, err
	}
	data, err := readFile(s.taskPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, inbox.NotFound("task %s not found", name)
	}
	if err != nil {
		return nil, inbox.Storage(err, "read task %s", name)
	}
	var m msgFile
	if err := m.decodeJSON(data); err != nil || m.ThreadID == "" {
		return nil, inbox.NotFound("task %s not found", name)
	}
	dir, _ := s.viewDir(m.ThreadID)
	h, err := s.readHeaderAt(dir, m.ThreadID)
	if err != nil {
		return nil, err // not found: the push never committed
	}
	first, err := s.readMessageAt(dir, m.ThreadID, 1)
	if err != nil || first.MessageID != m.MessageID {
		return nil, inbox.NotFound("task %s not found", name)
	}
	var p struct {
		Task inbox.TaskSpec `json:"task"`
	}
	if err := json.Unmarshal(first.PayloadJSON, &p); err != nil {
		return nil, corrupt(err, "task %s: its definition is not valid JSON", name)
	}
	t := &inbox.Task{TaskSpec: p.Task, Prompt: first.Body, ThreadID: h.ThreadID, Status: h.Status,
		CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt}
	if t.Owner == "" {
		t.Owner = t.Parent
	}
	for _, bm := range blobRefs(first) {
		if bm.Field == "body" {
			t.PromptBlob = bm.Blob
		}
	}
	if h.Lease != nil {
		t.StartedAt, t.LeaseToken = h.Lease.ClaimedAt, h.Lease.LeaseToken
	}
	t.Runner = s.taskRunner(name) // a runner forgets itself when the task ends
	return t, nil
}

// Tasks lists the tasks f selects, oldest first.
func (s *Store) Tasks(ctx context.Context, f inbox.TaskFilter) ([]*inbox.Task, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, tasksDir))
	if errors.Is(err, fs.ErrNotExist) {
		return []*inbox.Task{}, nil
	}
	if err != nil {
		return nil, inbox.Storage(err, "list tasks")
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && inbox.ValidateAgent("name", name) == nil {
			names = append(names, name)
		}
	}
	return inbox.TasksIn(ctx, names, f, s.TaskByName)
}

// taskRunnerFile is where a runner records the process running a task.
func (s *Store) taskRunnerFile(name string) string {
	return filepath.Join(s.dir, tasksDir, name+".runner")
}

// SetTaskRunner records the process running task name (written whole: a
// temp file renamed into place, so a reader never sees half a record), or
// forgets it when r is nil. The record is not synced: it is about a
// process, which a power cut ends anyway.
func (s *Store) SetTaskRunner(ctx context.Context, name string, r *inbox.TaskRunner) error {
	if err := inbox.ValidateAgent("name", name); err != nil {
		return err
	}
	p := s.taskRunnerFile(name)
	if r == nil {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return inbox.Storage(err, "forget the runner of task %s", name)
		}
		return nil
	}
	if err := renameio.WriteFile(p, r.AppendJSON(nil), s.fileMode, renameio.WithTempDir(s.tmpDir())); err != nil {
		return inbox.Storage(err, "record the runner of task %s", name)
	}
	return nil
}

// taskRunner reads task name's runner record, nil when there is none.
func (s *Store) taskRunner(name string) *inbox.TaskRunner {
	data, err := readFile(s.taskRunnerFile(name))
	if err != nil {
		return nil
	}
	var r inbox.TaskRunner
	if r.DecodeJSON(data) != nil {
		return nil
	}
	return &r
}

// TaskOutputPath is where a runner captures a running task's standard
// output: a file on the store's file system, so that output of any size
// becomes its result (inline, or a blob linked from this file).
func (s *Store) TaskOutputPath(ctx context.Context, name string) (string, error) {
	if err := inbox.ValidateAgent("name", name); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, tasksDir, name+".out"), nil
}

// TaskByThread returns the task a thread is, or inbox.ErrNotFound.
func (s *Store) TaskByThread(ctx context.Context, tid string) (*inbox.Task, error) {
	if err := inbox.ValidateID("thread", tid); err != nil {
		return nil, err
	}
	dir, _ := s.viewDir(tid)
	m, err := s.readMessageAt(dir, tid, 1)
	if err != nil {
		return nil, err
	}
	return inbox.TaskOfThread(ctx, tid, m, s.TaskByName)
}

// CancelTask cancels a queued or running task (the caller kills its
// process group): the thread becomes cancelled and the parent gets the
// failure message from the task, as for any failed task, so nothing
// waits for a result that will not come. c carries the failure payload
// ({"success":false,"error":…,"partial_output":…}) and any blobs.
func (s *Store) CancelTask(ctx context.Context, agent string, t *inbox.Task, c inbox.Content) (*inbox.Result, error) {
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return nil, err
	}
	now := s.now()
	m, err := s.message(ctx, now, t.Name, t.Parent, inbox.KindResult, c, "task "+t.Name+" cancelled by "+agent)
	if err != nil {
		return nil, err
	}
	defer m.discardBlobs()
	m.Status = inbox.StatusCancelled
	var res *inbox.Result
	err = s.mutate(ctx, t.ThreadID, func(tx *tx) error {
		if r, err := tx.idempotent("cancel", c.IdempotencyKey); r != nil || err != nil {
			res = r
			return err
		}
		if inbox.IsTerminal(tx.h.Status) {
			return inbox.InvalidState("task %s already finished (%s); there is nothing to cancel", t.Name, tx.h.Status)
		}
		res = tx.transition(agent, inbox.StatusCancelled, inbox.EventThreadCancelled, m,
			jsonrec.Fields{}.Str("cancelled_by", agent))
		return nil
	})
	if err == nil {
		s.seen(agent)
	}
	return res, err
}
