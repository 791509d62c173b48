package inbox

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"
)

// taskAlphabet is what a generated task name is drawn from: lower-case
// letters and digits that cannot be mistaken for one another.
const taskAlphabet = "abcdefghjkmnpqrstvwxyz23456789"

// PushTask queues a task (the rules of push): it checks spec and prompt
// (PrepareTask), builds the send that starts the task's thread (from the
// parent to the task's name, the prompt as its body and the spec as its
// content) and has create, the engine, commit that thread under the
// task's name. A generated name (spec.Name empty: task-xxxxxx) is drawn
// again while create finds it taken (task_name_taken), up to five more
// times; a name given that is taken is refused.
func PushTask(spec TaskSpec, prompt string, create func(spec TaskSpec, in SendInput) (*Thread, error)) (*Task, error) {
	if err := PrepareTask(&spec, prompt); err != nil {
		return nil, err
	}
	generated := spec.Name == ""
	for attempt := 0; ; attempt++ {
		if generated {
			c := make([]byte, 6)
			for i := range c {
				c[i] = taskAlphabet[rand.IntN(len(taskAlphabet))]
			}
			spec.Name = "task-" + string(c)
		}
		payload, _ := json.Marshal(map[string]any{"task": spec})
		in := SendInput{From: spec.Parent, To: spec.Name, Subject: Shorten(FirstLine(prompt), 80), Kind: KindTask,
			Content: Content{Body: prompt, PayloadJSON: string(payload)}}
		if err := PrepareSend(&in); err != nil {
			return nil, err
		}
		th, err := create(spec, in)
		var e *Error
		if generated && errors.As(err, &e) && e.Code == "task_name_taken" && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Task{TaskSpec: spec, Prompt: prompt, ThreadID: th.ThreadID, Status: th.Status,
			CreatedAt: th.CreatedAt, UpdatedAt: th.UpdatedAt}, nil
	}
}

// Runs reports whether runner record r is of t's current run: it started
// no earlier than t's claim. A backend asks this of a record that does not
// name its run's thread (one an older inbox wrote under the task's name
// alone), which may be left from an earlier task of the same name.
func (r *TaskRunner) Runs(t *Task) bool {
	claimed, err1 := ParseTime(t.StartedAt)
	started, err2 := ParseTime(r.StartedAt)
	return err1 == nil && err2 == nil && !started.Before(claimed)
}

// StartLease decides the start of a task (SPEC §7 "Exactly one start"):
// the claim of its thread t (whose lease is cur) as the task's name for
// secs seconds at now, which only a thread never claimed can give. Of
// any number of runners racing to start it, exactly one is given the
// lease; every other, and any start of a task that started before —
// also one whose runner died and whose lease has lapsed since — is
// refused (ErrInvalidState, code task_started): a task runs at most once.
// The engine records the lease as a claim's.
func StartLease(t *Thread, cur *Lease, name string, secs int, now time.Time) (Lease, error) {
	if cur != nil || t.Status != StatusPending {
		return Lease{}, Errorf(ErrInvalidState, "task_started", "",
			"task %s (thread %s) has started already (%s): a task is started once, and never again", name, t.ThreadID, t.Status)
	}
	return ClaimLease(t, cur, name, secs, now)
}
