package spool

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The task queue (SPEC §7). A queued task is a thread from its parent to
// the task's name (the sub-agent's identity) whose first message, kind
// task, carries the prompt, with the task's definition in its payload under
// "task". Its name is registered as tasks/<name>.json, a hard link to that
// first message made before the commit point: the link fails when the name
// is taken, which keeps task names unique. Thread status is the task's
// state: pending is queued, claimed or in_progress is running, terminal is
// finished.

// TaskSpec defines a queued task.
type TaskSpec struct {
	Name           string `json:"name"`
	Parent         string `json:"parent"`
	Model          string `json:"model,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

// Task is a queued, running or finished task.
type Task struct {
	TaskSpec
	Prompt    string `json:"prompt"`
	ThreadID  string `json:"thread_id"`
	Status    string `json:"status"` // the thread's
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	// StartedAt is when the task was claimed to run, if it was.
	StartedAt  string `json:"started_at,omitempty"`
	LeaseToken int64  `json:"lease_token,omitempty"`
}

// State is the task's place in the queue: queued, running or finished.
func (t *Task) State() string {
	switch {
	case t.Status == StatusPending:
		return "queued"
	case IsTerminal(t.Status):
		return "finished"
	}
	return "running"
}

func (s *Store) taskPath(name string) string { return filepath.Join(s.dir, tasksDir, name+".json") }

// registerTask links src (a new thread's first message) as the task name.
func (s *Store) registerTask(name, src string) error {
	p := s.taskPath(name)
	err := os.Link(src, p)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(filepath.Dir(p), s.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return storageErr(err, "create task registry")
		}
		err = os.Link(src, p)
	}
	if errors.Is(err, fs.ErrExist) {
		if _, err := s.TaskByName(name); errors.Is(err, ErrNotFound) {
			// A link left by a push that never committed: take its place.
			os.Remove(p)
			err = os.Link(src, p)
		} else {
			return newErr(ErrInvalidInput, "task_name_taken", "name", "task name %q is taken; choose another --name", name)
		}
	}
	return storageErr(err, "register task %s", name)
}

var taskAlphabet = "abcdefghjkmnpqrstvwxyz23456789"

// Push queues a task: it returns at once. A name is generated when spec.Name
// is empty; parent defaults to "main".
func (s *Store) Push(spec TaskSpec, prompt string) (*Task, error) {
	if spec.Parent == "" {
		spec.Parent = "main"
	}
	if err := ValidateAgent("parent", spec.Parent); err != nil {
		return nil, err
	}
	if spec.Name != "" {
		if err := ValidateAgent("name", spec.Name); err != nil {
			return nil, err
		}
	}
	if err := validateLabel("model", spec.Model); err != nil {
		return nil, err
	}
	if spec.TimeoutSeconds < 0 || spec.TimeoutSeconds > MaxLeaseSecs {
		return nil, invalidf("timeout-seconds", "--timeout-seconds %d is out of range: give 0 (no limit) to %d", spec.TimeoutSeconds, MaxLeaseSecs)
	}
	if strings.TrimSpace(prompt) == "" {
		return nil, invalidf("prompt", "the task needs a prompt: inbox push [flags] PROMPT")
	}
	if err := validateText("prompt", prompt, MaxBodyLen); err != nil {
		return nil, err
	}
	generated := spec.Name == ""
	for attempt := 0; ; attempt++ {
		if generated {
			b := make([]byte, 6)
			for i := range b {
				b[i] = taskAlphabet[rand.IntN(len(taskAlphabet))]
			}
			spec.Name = "task-" + string(b)
		}
		payload, _ := json.Marshal(map[string]any{"task": spec})
		in := SendInput{From: spec.Parent, To: spec.Name, Subject: firstLine(prompt, 80), Kind: KindTask,
			Content: Content{Body: prompt, PayloadJSON: string(payload)}}
		if err := validateSendBasics(&in); err != nil {
			return nil, err
		}
		t, _, err := s.prepareThread(in)
		if err != nil {
			return nil, err
		}
		t.taskName = spec.Name
		t.ev.EventType = EventThreadCreated
		err = t.commit()
		if err == nil {
			s.seen(spec.Parent)
			return &Task{TaskSpec: spec, Prompt: prompt, ThreadID: t.tid, Status: t.h.Status,
				CreatedAt: t.h.CreatedAt, UpdatedAt: t.h.UpdatedAt}, nil
		}
		os.RemoveAll(t.dir) // nothing was committed: do not leave the directory behind
		var e *Error
		if generated && errors.As(err, &e) && e.Code == "task_name_taken" && attempt < 5 {
			continue
		}
		return nil, err
	}
}

func firstLine(s string, n int) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	line = strings.TrimSpace(line)
	if r := []rune(line); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return line
}

// TaskByName returns a task.
func (s *Store) TaskByName(name string) (*Task, error) {
	if err := ValidateAgent("name", name); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(s.taskPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound("task %s not found", name)
	}
	if err != nil {
		return nil, storageErr(err, "read task %s", name)
	}
	var m msgFile
	if err := unmarshalMsgFile(data, &m); err != nil || m.ThreadID == "" {
		return nil, notFound("task %s not found", name)
	}
	dir, _ := s.viewDir(m.ThreadID)
	h, err := s.readHeaderAt(dir, m.ThreadID)
	if err != nil {
		return nil, err // not found: the push never committed
	}
	first, err := s.readMessageAt(dir, m.ThreadID, 1)
	if err != nil || first.MessageID != m.MessageID {
		return nil, notFound("task %s not found", name)
	}
	var p struct {
		Task TaskSpec `json:"task"`
	}
	if err := json.Unmarshal(first.PayloadJSON, &p); err != nil {
		return nil, corrupt(err, "task %s: its definition is not valid JSON", name)
	}
	t := &Task{TaskSpec: p.Task, Prompt: first.Body, ThreadID: h.ThreadID, Status: h.Status,
		CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt}
	if h.Lease != nil {
		t.StartedAt, t.LeaseToken = h.Lease.ClaimedAt, h.Lease.LeaseToken
	}
	return t, nil
}

// Tasks lists every task (of parent, when given), oldest first.
func (s *Store) Tasks(parent string) ([]*Task, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, tasksDir))
	if errors.Is(err, fs.ErrNotExist) {
		return []*Task{}, nil
	}
	if err != nil {
		return nil, storageErr(err, "list tasks")
	}
	out := []*Task{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || ValidateAgent("name", name) != nil {
			continue
		}
		t, err := s.TaskByName(name)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if parent == "" || t.Parent == parent {
			out = append(out, t)
		}
	}
	sortTasks(out)
	return out, nil
}

func sortTasks(ts []*Task) {
	slices.SortFunc(ts, func(a, b *Task) int { return strings.Compare(a.ThreadID, b.ThreadID) })
}

// TaskRunnerFile is where a runner records the process running a task.
func (s *Store) TaskRunnerFile(name string) string {
	return filepath.Join(s.dir, tasksDir, name+".runner")
}
