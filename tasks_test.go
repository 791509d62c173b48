package inbox_test

import (
	"testing"

	"github.com/inbox-dev/inbox"
)

// TestRunnerRuns: a runner record is a task's current run's only when it
// started no earlier than the task's claim; a record from an earlier task
// of the same name, or a task not claimed, is not.
func TestRunnerRuns(t *testing.T) {
	claimed := "2026-01-02T03:04:05.5Z"
	for _, c := range []struct {
		started, claimed string
		want             bool
	}{
		{"2026-01-02T03:04:05.6Z", claimed, true},
		{"2026-01-02T03:04:05.5Z", claimed, true},
		{"2026-01-02T03:04:05.45Z", claimed, false}, // an earlier run's
		{"2026-01-02T03:04:06Z", "", false},         // not claimed
		{"", claimed, false},
	} {
		r := &inbox.TaskRunner{StartedAt: c.started}
		if got := r.Runs(&inbox.Task{StartedAt: c.claimed}); got != c.want {
			t.Errorf("record started %q, task claimed %q: got %v, want %v", c.started, c.claimed, got, c.want)
		}
	}
}
