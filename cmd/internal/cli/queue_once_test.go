package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/natstest"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/natsbus"
	"github.com/inbox-dev/inbox/spool"
)

// runOnceRounds is how many rounds TestRunStartsOnce races: 20 in the
// long run (go test -tags long), 2 otherwise.
func runOnceRounds() int {
	if testproc.Long {
		return 20
	}
	return 2
}

// TestRunStartsOnce races 8 `inbox run` processes, started at once, on
// the 50 tasks of main's queue, round after round, on both backends
// (SPEC §7 "Exactly one start"). Each task appends its name to a file
// (its executions are counted, not its results) and waits to be let go.
// Once every run has returned, each of the 50 tasks is running (run
// returns once what it started shows as running), and each is in the
// "running" of exactly one run; once let go, every task was executed
// exactly once and main's mailbox holds its one result.
func TestRunStartsOnce(t *testing.T) {
	t.Run("dir", func(t *testing.T) {
		t.Parallel()
		s, db := storetest.New(t, spool.Options{})
		raceRuns(t, s, db, nil)
	})
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		srv := natstest.Start(t)
		db := natstest.Store(srv, "runonce")
		s, err := natsbus.Open(t.Context(), db, natsbus.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		raceRuns(t, s, db, []string{"INBOX_TEST_NATS=" + srv.ClientURL(), "INBOX_TEST_DIRS=1"})
	})
}

// raceRuns is TestRunStartsOnce on the store s at db; env is what the
// commands need besides to reach it.
func raceRuns(t *testing.T, s inbox.Bus, db string, env []string) {
	const runs, tasks = 8, 50
	bin := testproc.Installed(t, "inbox")
	work := t.TempDir()
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INBOX_") {
			base = append(base, kv)
		}
	}
	base = append(append(base, env...), "INBOX_DB="+db, "WORK="+work)
	t.Cleanup(func() { testproc.KillTagged("WORK", work, 10*time.Second) })
	for round := range runOnceRounds() {
		execs := filepath.Join(work, fmt.Sprintf("executions.%d", round))
		release := filepath.Join(work, fmt.Sprintf("release.%d", round))
		// The task appends its name, then waits to be let go.
		task := fmt.Sprintf(`echo "$INBOX_TASK_NAME" >> %s; while [ ! -e %s ]; do sleep 0.05; done; echo "done $INBOX_TASK_NAME"`,
			shq(execs), shq(release))
		var names []string
		for i := range tasks {
			name := fmt.Sprintf("r%d-t%d", round, i)
			if _, err := s.Push(t.Context(), inbox.TaskSpec{Name: name, Owner: "main"}, "task "+name); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		cmds := make([]*exec.Cmd, runs)
		for i := range cmds {
			cmds[i] = exec.Command(bin, "run", "--exec", task, "--json")
			cmds[i].Env = base
		}
		outs := runConcurrently(t, cmds)
		// Every run has returned: what each started is running.
		startedBy := map[string][]int{}
		for i, o := range outs {
			code, err := exitStatus(o.err)
			if err != nil || (code != 0 && code != exitNoWork) {
				t.Fatalf("round %d: run %d: exit %d (%v)\n%s%s", round, i, code, err, o.stdout.String(), o.stderr.String())
			}
			var out struct {
				Running []string `json:"running"`
			}
			if err := json.Unmarshal(o.stdout.Bytes(), &out); err != nil {
				t.Fatalf("round %d: run %d printed no JSON: %v\n%s", round, i, err, o.stdout.String())
			}
			for _, n := range out.Running {
				startedBy[n] = append(startedBy[n], i)
			}
		}
		var notRunning, notOnce []string
		for _, n := range names {
			task, err := s.TaskByName(t.Context(), n)
			if err != nil {
				t.Fatal(err)
			}
			if st := task.State(); st != "running" {
				notRunning = append(notRunning, n+" "+st)
			}
			if len(startedBy[n]) != 1 {
				notOnce = append(notOnce, fmt.Sprintf("%s %v", n, startedBy[n]))
			}
		}
		if len(notRunning) > 0 {
			t.Errorf("round %d: once every run returned, %d tasks are not running: %v", round, len(notRunning), notRunning)
		}
		if len(notOnce) > 0 {
			t.Errorf("round %d: %d tasks are not in the running of exactly one run (task [runs]): %v", round, len(notOnce), notOnce)
		}
		if err := os.WriteFile(release, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var results []string
		testproc.Eventually(t, 60*time.Second, fmt.Sprintf("the %d results of round %d", tasks, round), func() bool {
			msgs, err := s.Collect(t.Context(), "main", "", false, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				results = append(results, m.FromAgent)
			}
			return len(results) >= tasks
		})
		data, err := os.ReadFile(execs)
		if err != nil {
			t.Fatal(err)
		}
		ran := strings.Fields(string(data))
		slices.Sort(ran)
		slices.Sort(results)
		if want := slices.Sorted(slices.Values(names)); !slices.Equal(ran, want) || !slices.Equal(results, want) {
			t.Fatalf("round %d: %d executions, %d results of %d tasks, want each once:\nexecutions %v\nresults %v",
				round, len(ran), len(results), tasks, ran, results)
		}
	}
}
