package mcpserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/internal/testproc"
)

// TestMCPRunBesideCLIRun: an MCP run and a CLI `inbox run` at the same
// moment on one queue start each task once (SPEC §7 "Exactly one
// start"), round after round; each task appends its name to a file, so
// its executions are counted, not its results.
func TestMCPRunBesideCLIRun(t *testing.T) {
	bin := testproc.Installed(t, "inbox")
	cli.Executable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { cli.Executable = os.Executable })
	work := t.TempDir()
	execs := filepath.Join(work, "executions")
	command := `echo "$INBOX_TASK_NAME" >> ` + execs
	mt := newMCPTestEnv(t, "main", false, func(k string) string {
		if k == "INBOX_EXEC" {
			return command
		}
		return os.Getenv(k)
	})
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INBOX_") {
			env = append(env, kv)
		}
	}
	env = append(env, "INBOX_DB="+mt.db, "INBOX_EXEC="+command, "WORK="+work)
	t.Cleanup(func() { testproc.KillTagged("WORK", work, 10*time.Second) })
	const rounds, tasks = 4, 12
	var names, results []string
	for round := range rounds {
		for i := range tasks {
			name := fmt.Sprintf("r%d-t%d", round, i)
			if _, err := mt.bus.Push(t.Context(), inbox.TaskSpec{Name: name, Owner: "main"}, "task "+name); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		cmd := exec.Command(bin, "run", "--json")
		cmd.Env = env
		var wg sync.WaitGroup
		wg.Add(1)
		var out []byte
		var err error
		go func() {
			defer wg.Done()
			out, err = cmd.CombinedOutput()
		}()
		ran, _ := mt.call("run", nil)
		wg.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 0 && code != 10 {
			t.Fatalf("round %d: inbox run: exit %d (%v)\n%s", round, code, err, out)
		}
		if ran["ok"] != true {
			t.Fatalf("round %d: the run tool: %v", round, ran)
		}
		if pid, ok := ran["runner_pid"].(float64); ok {
			t.Cleanup(func() { waitExit(t, int(pid)) })
		}
		testproc.Eventually(t, 30*time.Second, fmt.Sprintf("the results of round %d", round), func() bool {
			msgs, err := mt.bus.Collect(t.Context(), "main", "", false, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				results = append(results, m.FromAgent)
			}
			return len(results) >= len(names)
		})
	}
	data, err := os.ReadFile(execs)
	if err != nil {
		t.Fatal(err)
	}
	ran := strings.Fields(string(data))
	slices.Sort(ran)
	slices.Sort(results)
	slices.Sort(names)
	if !slices.Equal(ran, names) || !slices.Equal(results, names) {
		t.Fatalf("%d executions, %d results of %d tasks, want each once:\nexecutions %v\nresults %v", len(ran), len(results), len(names), ran, results)
	}
}

// TestMCPPushPromptIsThePrompt: the push tool's prompt is the prompt as
// given, also when it starts with words that the CLI's push takes as
// seed 003's options (name=, model=, timeout=).
func TestMCPPushPromptIsThePrompt(t *testing.T) {
	mt := newMCPTest(t, "main", false)
	p := mt.ok("push", map[string]any{"prompt": "name=x model=y timeout=5 is what the report says"})
	if name, _ := get(p, "task.name").(string); !strings.HasPrefix(name, "task-") || get(p, "task.model") != nil {
		t.Fatalf("push: %v, want a generated name and no model", p)
	}
	task, err := mt.bus.TaskByName(t.Context(), get(p, "task.name").(string))
	if err != nil || task.Prompt != "name=x model=y timeout=5 is what the report says" || task.TimeoutSeconds != 0 {
		t.Fatalf("the task: %+v (%v), want the prompt as given", task, err)
	}
}
