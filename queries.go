package inbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// PrepareList checks a list's filter and returns the statuses it selects
// (every status when none is given).
func PrepareList(f ListFilter) (statuses []string, err error) {
	for _, a := range []struct{ field, name string }{{"agent", f.Agent}, {"created-by", f.CreatedBy}, {"assigned-to", f.AssignedTo}} {
		if a.name != "" {
			if err := ValidateAgent(a.field, a.name); err != nil {
				return nil, err
			}
		}
	}
	statuses = f.Statuses
	if len(statuses) == 0 {
		statuses = Statuses
	}
	if err := ValidateStatuses("status", statuses); err != nil {
		return nil, err
	}
	if err := ValidateLimit(f.Limit); err != nil {
		return nil, err
	}
	return statuses, nil
}

// PrepareFetch checks a fetch and returns the statuses it looks for
// (DefaultFetchStatuses when none is given).
func PrepareFetch(agent string, statuses []string, limit int) ([]string, error) {
	if err := ValidateAgent("agent", agent); err != nil {
		return nil, err
	}
	if len(statuses) == 0 {
		statuses = DefaultFetchStatuses
	}
	if err := ValidateStatuses("status", statuses); err != nil {
		return nil, err
	}
	if err := ValidateLimit(limit); err != nil {
		return nil, err
	}
	return statuses, nil
}

// PrepareArchive checks an archive's age and statuses and returns the
// statuses it archives: terminal ones only, by default done, failed and
// cancelled.
func PrepareArchive(olderThan time.Duration, statuses []string) ([]string, error) {
	if olderThan < 0 {
		return nil, Invalid("older_than", "must not be negative")
	}
	if len(statuses) == 0 {
		statuses = []string{StatusDone, StatusFailed, StatusCancelled}
	}
	if err := ValidateStatuses("status", statuses); err != nil {
		return nil, err
	}
	for _, st := range statuses {
		if !IsTerminal(st) {
			return nil, Invalid("status", "%s: only terminal threads (done, failed, cancelled) can be archived", st)
		}
	}
	return statuses, nil
}

// PriorityRank orders priorities, highest first: high 0, normal (or
// anything else) 1, low 2.
func PriorityRank(p string) int {
	switch p {
	case "high":
		return 0
	case "low":
		return 2
	}
	return 1
}

// CompareMail orders a mailbox as receive and check hand it out: high
// priority first, oldest first within a priority (newest first with
// lifo), by the event ids that delivered the mail.
func CompareMail(aPriority string, aEvent int64, bPriority string, bEvent int64, lifo bool) int {
	if c := PriorityRank(aPriority) - PriorityRank(bPriority); c != 0 {
		return c
	}
	if lifo {
		return cmp.Compare(bEvent, aEvent)
	}
	return cmp.Compare(aEvent, bEvent)
}

// MaxSessionMarkLen bounds a session mark.
const MaxSessionMarkLen = 4096

// CheckSession checks an agent's session name for a session mark.
func CheckSession(agent, session string) error {
	if err := ValidateAgent("agent", agent); err != nil {
		return err
	}
	return ValidateText("session", session, MaxIdemKeyLen)
}

// CheckSessionMark checks a session mark to record (and its session).
func CheckSessionMark(agent, session, mark string) error {
	if err := CheckSession(agent, session); err != nil {
		return err
	}
	return ValidateText("mark", mark, MaxSessionMarkLen)
}

// SessionKey names agent's session in a store: the first 16 bytes of the
// SHA-256 of agent, a NUL and session, in hex.
func SessionKey(agent, session string) string {
	sum := sha256.Sum256([]byte(agent + "\x00" + session))
	return hex.EncodeToString(sum[:16])
}

// Selects reports whether the filter (checked by PrepareList, which gave
// statuses) selects thread t.
func (f ListFilter) Selects(t *Thread, statuses []string) bool {
	switch {
	case !slices.Contains(statuses, t.Status),
		f.AssignedTo != "" && t.AssignedTo != f.AssignedTo,
		f.CreatedBy != "" && t.CreatedBy != f.CreatedBy,
		f.Agent != "" && t.AssignedTo != f.Agent && t.CreatedBy != f.Agent,
		f.RunID != "" && t.RunID != f.RunID,
		f.TaskID != "" && t.TaskID != f.TaskID,
		f.Members != nil && !slices.Contains(f.Members, t.AssignedTo) && !slices.Contains(f.Members, t.CreatedBy),
		t.Mail && !f.Mail:
		return false
	}
	return true
}

// MessageNotFound is the error for a message id a thread does not hold.
func MessageNotFound(id, tid string) error {
	return NotFound("message %s not found in thread %s", id, tid)
}

// TaskOfThread returns the task whose thread tid is, from the thread's
// first message (first, nil when there is none): a task's thread starts
// with its prompt, which names the task; byName (the engine's
// TaskByName) must give that task back for this thread.
func TaskOfThread(ctx context.Context, tid string, first *Message, byName func(context.Context, string) (*Task, error)) (*Task, error) {
	var p struct {
		Task TaskSpec `json:"task"`
	}
	if first == nil || first.Kind != KindTask || json.Unmarshal(first.PayloadJSON, &p) != nil || p.Task.Name == "" {
		return nil, NotFound("thread %s is not a task", tid)
	}
	t, err := byName(ctx, p.Task.Name)
	if err != nil || t.ThreadID != tid {
		return nil, NotFound("thread %s is not a task", tid)
	}
	return t, nil
}

// PrepareWatch checks a watch: the agent, the statuses and the cursor
// (nil: from now).
func PrepareWatch(agent string, statuses []string, after *int64) error {
	if err := ValidateAgent("agent", agent); err != nil {
		return err
	}
	if err := ValidateStatuses("status", statuses); err != nil {
		return err
	}
	if after != nil && *after < 0 {
		return Invalid("after_event", "must be 0 or more")
	}
	return nil
}

// Selects reports whether the filter selects task t.
func (f TaskFilter) Selects(t *Task) bool {
	return (f.Owner == "" || t.Owner == f.Owner) && (f.Parent == "" || t.Parent == f.Parent)
}

// TasksIn returns the tasks of names (as byName, the engine's
// TaskByName, reads them; a name whose task is gone is skipped) that f
// selects, by thread id.
func TasksIn(ctx context.Context, names []string, f TaskFilter, byName func(context.Context, string) (*Task, error)) ([]*Task, error) {
	out := []*Task{}
	for _, n := range names {
		t, err := byName(ctx, n)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if f.Selects(t) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(x, y *Task) int { return cmp.Compare(x.ThreadID, y.ThreadID) })
	return out, nil
}
