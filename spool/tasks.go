package spool

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// The task queue (SPEC §7). A queued task is a thread from its parent to
// the task's name (the sub-agent's identity) whose first message, kind
// task, carries the prompt, with the task's definition in its payload under
// "task". Thread status is the task's state: pending is queued, claimed or
// in_progress is running, terminal is finished.
//
// A name is registered as tasks/<name>.json, a hard link to its task's
// first message made before the commit point: the link fails when the
// name is taken, which keeps the names of live (queued or running) tasks
// unique. A finished task gives its name up (SPEC §7 "Task names"): the
// push that takes the name again first links the finished task into the
// history, tasks/finished/<name>/<thread>.json (fsynced: nothing in the
// log would bring it back), then replaces tasks/<name>.json, all under
// the event log's lock that serialises registrations. So tasks/<name>.json
// is the name's live task, or its newest finished one; a push that never
// committed leaves a link to a thread that does not exist, which readers
// pass over (to the newest in the history) and the next push of the name
// replaces.

func (s *Store) taskPath(name string) string { return filepath.Join(s.dir, tasksDir, name+".json") }

// finishedDir holds the finished tasks whose names were taken again.
const finishedDir = "finished"

// finishedPath is where the history keeps the finished task name of
// thread tid.
func (s *Store) finishedPath(name, tid string) string {
	return filepath.Join(s.dir, tasksDir, finishedDir, name, tid+".json")
}

// registerTask links src (a new thread's first message) as the task name.
// It runs under the event log's lock (commitAll), as every registration
// does, so no other push of the name comes between its look and its link.
func (s *Store) registerTask(ctx context.Context, name, src string) error {
	p := s.taskPath(name)
	err := os.Link(src, p)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(filepath.Dir(p), s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return inbox.Storage(err, "create task registry")
		}
		err = os.Link(src, p)
	}
	if !errors.Is(err, fs.ErrExist) {
		return inbox.Storage(err, "register task %s", name)
	}
	old, oerr := s.taskAt(name, p)
	switch {
	case errors.Is(oerr, inbox.ErrNotFound):
		// A link left by a push that never committed: take its place.
	case oerr != nil:
		return oerr
	case old.State() != "finished":
		return inbox.Errorf(inbox.ErrInvalidInput, "task_name_taken", "name",
			"%q is taken by a task that is %s (%s); a name is free again once its task finished: choose another, or wait", name, old.State(), old.ThreadID)
	default:
		if err := s.keepFinished(name, p, old.ThreadID); err != nil {
			return err
		}
	}
	return s.relink(src, p)
}

// keepFinished links p, the registration of the finished task of thread
// tid, into the name's history and makes that link durable.
func (s *Store) keepFinished(name, p, tid string) error {
	h := s.finishedPath(name, tid)
	dir := filepath.Dir(h)
	made := !exists(dir)
	if err := os.MkdirAll(dir, s.dirMode); err != nil {
		return inbox.Storage(err, "keep finished task %s", name)
	}
	if err := os.Link(p, h); err != nil && !errors.Is(err, fs.ErrExist) {
		return inbox.Storage(err, "keep finished task %s", name)
	}
	if s.unsynced {
		return nil
	}
	if made {
		// The name's directory and the history directory itself.
		for _, d := range []string{filepath.Dir(filepath.Dir(dir)), filepath.Dir(dir)} {
			if err := syncDir(d); err != nil {
				return err
			}
		}
	}
	return syncDir(dir)
}

// relink makes p a link to src, replacing what p was in one rename.
func (s *Store) relink(src, p string) error {
	tmp := p + ".new"
	os.Remove(tmp) // left by a push cut off here
	if err := os.Link(src, tmp); err != nil {
		return inbox.Storage(err, "register task %s", filepath.Base(p))
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return inbox.Storage(err, "register task %s", filepath.Base(p))
	}
	return nil
}

// restoreTask registers task name of thread tid, whose first message is
// at p, as replay rebuilds it from the log: tasks/<name>.json names the
// newest task of the name (thread ids grow with time), and an older one
// goes into the history, where a name taken again put it.
func (s *Store) restoreTask(name, tid, p string) error {
	tp := s.taskPath(name)
	if err := os.MkdirAll(filepath.Dir(tp), s.dirMode); err != nil {
		return inbox.Storage(err, "restore task %s", name)
	}
	cur := ""
	if data, err := readFile(tp); err == nil {
		var m msgFile
		if m.decodeJSON(data) == nil {
			cur = m.ThreadID
		}
	}
	switch {
	case cur == tid:
		return s.relink(p, tp) // the message file was rewritten
	case cur > tid:
		return s.keepFinished(name, p, tid)
	case cur != "":
		if _, err := s.readHeader(cur); err == nil {
			if err := s.keepFinished(name, tp, cur); err != nil {
				return err
			}
		}
	}
	return s.relink(p, tp)
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

// TaskByName returns the task of that name that is queued or running,
// else the newest that finished.
func (s *Store) TaskByName(ctx context.Context, name string) (*inbox.Task, error) {
	if err := inbox.ValidateAgent("name", name); err != nil {
		return nil, err
	}
	t, err := s.taskAt(name, s.taskPath(name))
	if !errors.Is(err, inbox.ErrNotFound) {
		if err == nil {
			t.Runner = s.taskRunner(t) // forgotten a moment after its task ends
		}
		return t, err
	}
	// No live task: the push that took the name last never committed.
	hist, _ := s.finishedOf(name)
	for i := len(hist) - 1; i >= 0; i-- {
		if t, err := s.taskAt(name, hist[i]); !errors.Is(err, inbox.ErrNotFound) {
			return t, err
		}
	}
	return nil, inbox.NotFound("task %s not found", name)
}

// finishedOf lists the history of name, oldest first.
func (s *Store) finishedOf(name string) ([]string, error) {
	dir := filepath.Dir(s.finishedPath(name, "x"))
	entries, err := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, err
}

// taskAt reads the task registered at p (a link to its first message) as
// name: inbox.ErrNotFound when its thread does not exist (the push never
// committed) or p is not that task's.
func (s *Store) taskAt(name, p string) (*inbox.Task, error) {
	data, err := readFile(p)
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
	var pl struct {
		Task inbox.TaskSpec `json:"task"`
	}
	if err := json.Unmarshal(first.PayloadJSON, &pl); err != nil {
		return nil, corrupt(err, "task %s: its definition is not valid JSON", name)
	}
	if pl.Task.Name != name {
		return nil, inbox.NotFound("task %s not found", name)
	}
	t := &inbox.Task{TaskSpec: pl.Task, Prompt: first.Body, ThreadID: h.ThreadID, Status: h.Status,
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
	return t, nil
}

// Tasks lists the tasks f selects, oldest first: each name's live or
// newest finished task, and the finished tasks in the names' history.
func (s *Store) Tasks(ctx context.Context, f inbox.TaskFilter) ([]*inbox.Task, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, tasksDir))
	if errors.Is(err, fs.ErrNotExist) {
		return []*inbox.Task{}, nil
	}
	if err != nil {
		return nil, inbox.Storage(err, "list tasks")
	}
	// A name, or a path in the history (which no name can be: names
	// have no "/").
	var keys []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && inbox.ValidateAgent("name", name) == nil {
			keys = append(keys, name)
		}
	}
	names, _ := os.ReadDir(filepath.Join(s.dir, tasksDir, finishedDir))
	for _, e := range names {
		if inbox.ValidateAgent("name", e.Name()) != nil {
			continue
		}
		hist, err := s.finishedOf(e.Name())
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, inbox.Storage(err, "list finished tasks")
		}
		keys = append(keys, hist...)
	}
	tasks, err := inbox.TasksIn(ctx, keys, f, func(ctx context.Context, key string) (*inbox.Task, error) {
		if !strings.Contains(key, "/") {
			return s.TaskByName(ctx, key)
		}
		return s.taskAt(filepath.Base(filepath.Dir(key)), key)
	})
	// A task both live and in the history: a push cut off between the
	// two links, or a name whose newest push never committed.
	return slices.CompactFunc(tasks, func(a, b *inbox.Task) bool { return a.ThreadID == b.ThreadID }), err
}

// A task's runner record and output capture belong to its run: they are
// named by the task's name and thread (tasks/<name>.<thread>.runner and
// .out; a thread id has no "."), so that a runner tidying up after its
// task finished never touches those of the task that took the name next.

// runFile is the file of task name's run in thread tid with extension ext.
func (s *Store) runFile(name, tid, ext string) string {
	return filepath.Join(s.dir, tasksDir, name+"."+tid+ext)
}

// legacyRunnerFile is where a runner of an older inbox recorded itself.
func (s *Store) legacyRunnerFile(name string) string {
	return filepath.Join(s.dir, tasksDir, name+".runner")
}

// SetTaskRunner records the process running task name, the name's live
// task (written whole: a temp file renamed into place, so a reader never
// sees half a record). With r nil it forgets the records of the name's
// tasks that have finished; a running task's record stays, for Reap to
// judge. The record is not synced: it is about a process, which a power
// cut ends anyway.
func (s *Store) SetTaskRunner(ctx context.Context, name string, r *inbox.TaskRunner) error {
	if err := inbox.ValidateAgent("name", name); err != nil {
		return err
	}
	t, err := s.TaskByName(ctx, name)
	if r == nil {
		var gone []string
		if err == nil && t.State() == "finished" {
			gone = append(gone, s.runFile(name, t.ThreadID, ".runner"), s.legacyRunnerFile(name))
		}
		hist, _ := s.finishedOf(name) // only finished tasks are there
		for _, h := range hist {
			gone = append(gone, s.runFile(name, strings.TrimSuffix(filepath.Base(h), ".json"), ".runner"))
		}
		for _, p := range gone {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return inbox.Storage(err, "forget the runner of task %s", name)
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	p := s.runFile(name, t.ThreadID, ".runner")
	if err := renameio.WriteFile(p, r.AppendJSON(nil), s.fileMode, renameio.WithTempDir(s.tmpDir())); err != nil {
		return inbox.Storage(err, "record the runner of task %s", name)
	}
	return nil
}

// taskRunner reads the runner record of t's run, nil when there is none.
func (s *Store) taskRunner(t *inbox.Task) *inbox.TaskRunner {
	data, err := readFile(s.runFile(t.Name, t.ThreadID, ".runner"))
	legacy := errors.Is(err, fs.ErrNotExist)
	if legacy {
		data, err = readFile(s.legacyRunnerFile(t.Name))
	}
	var r inbox.TaskRunner
	if err != nil || r.DecodeJSON(data) != nil {
		return nil
	}
	if legacy && !r.Runs(t) {
		return nil
	}
	return &r
}

// TaskOutputPath is where a runner captures the standard output of task
// name (its live task): a file on the store's file system, so that output
// of any size becomes its result (inline, or a blob linked from this
// file).
func (s *Store) TaskOutputPath(ctx context.Context, name string) (string, error) {
	t, err := s.TaskByName(ctx, name)
	if err != nil {
		return "", err
	}
	return s.runFile(name, t.ThreadID, ".out"), nil
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
	// The name's live task, or this thread's in the name's history.
	return inbox.TaskOfThread(ctx, tid, m, func(ctx context.Context, name string) (*inbox.Task, error) {
		if t, err := s.TaskByName(ctx, name); err != nil || t.ThreadID == tid {
			return t, err
		}
		return s.taskAt(name, s.finishedPath(name, tid))
	})
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
		if r, err := tx.idempotent("cancel", c.IdempotencyKey, inbox.CancelTaskArgs(agent, c)); r != nil || err != nil {
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

// StartTask claims task t's thread for its run, as the task's name, if
// it was never claimed (inbox.StartLease): under the thread's lock, so of
// racing starts exactly one finds it unclaimed. The claim reads the
// prompt, as any claim reads what it was sent.
func (s *Store) StartTask(ctx context.Context, t *inbox.Task, leaseSeconds int) (*inbox.Result, error) {
	if err := inbox.CheckLeaseArgs(t.Name, t.ThreadID, leaseSeconds); err != nil {
		return nil, err
	}
	var res *inbox.Result
	err := s.mutate(ctx, t.ThreadID, func(x *tx) error {
		l, err := inbox.StartLease(&x.h.Thread, x.h.Lease, t.Name, leaseSeconds, x.now)
		if err != nil {
			return err
		}
		x.setLease(l)
		x.h.Status, x.h.AssignedTo = inbox.StatusClaimed, t.Name
		payload := jsonrec.Fields{}.Num("lease_token", l.LeaseToken).Str("expires_at", l.ExpiresAt).JSON()
		x.ev = inbox.Event{EventType: inbox.EventThreadClaimed, Agent: t.Name, Summary: "claimed by " + t.Name, PayloadJSON: payload}
		x.readBy = t.Name
		res = &inbox.Result{Thread: &x.h.Thread, Lease: x.h.Lease}
		return nil
	})
	if err == nil {
		s.seen(t.Name)
	}
	return res, err
}
