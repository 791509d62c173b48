package cli

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// readmeShellBlocks returns the ```sh blocks of a Markdown file, in order,
// those under a "## " heading that in says yes to.
func readmeShellBlocks(t *testing.T, path string, in func(section string) bool) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []string
	var cur *strings.Builder
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "## "):
			section = line
		case cur == nil && line == "```sh":
			cur = new(strings.Builder)
		case cur != nil && line == "```":
			if in(section) {
				blocks = append(blocks, cur.String())
			}
			cur = nil
		case cur != nil:
			cur.WriteString(line)
			cur.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s: a ```sh block is never closed", path)
	}
	return blocks
}

// readmeNATSSection is the README's section on NATS stores, whose sh
// blocks run in a shell of their own, beside a server
// (TestNATSServerReadme), rather than in TestReadmeSnippets's.
const readmeNATSSection = "## Many machines: the same CLI on NATS JetStream"

// TestReadmeSnippets runs every ```sh block of README.md after the first
// (which builds the binary and runs the test suite), but those of its
// section on NATS (TestNATSServerReadme runs them), in one bash, in order,
// as a reader pasting them would: in a fresh directory holding bin/inbox,
// stopping at the first command that fails. The store must then pass fsck.
func TestReadmeSnippets(t *testing.T) {
	blocks := readmeShellBlocks(t, filepath.Join("..", "..", "..", "README.md"), func(section string) bool { return section != readmeNATSSection })
	if len(blocks) < 5 {
		t.Fatalf("README.md has %d sh blocks; expected the build block and the walkthrough", len(blocks))
	}
	if !strings.Contains(blocks[0], "go build") || !strings.Contains(blocks[0], "go test -timeout 30m ./...") {
		t.Fatalf("the README's first sh block must build and test:\n%s", blocks[0])
	}
	// CI runs the newcomer's test command as it stands in the README.
	var testCmd string
	for _, line := range strings.Split(blocks[0], "\n") {
		if strings.HasPrefix(line, "go test ") {
			testCmd = line
		}
	}
	ci, err := os.ReadFile(filepath.Join("..", "..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains("\n"+string(ci)+"\n", "\n"+testCmd+"\n") {
		t.Errorf(".ci/run does not run the README's test command, a line of its own: %q", testCmd)
	}

	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testproc.Installed(t, "inbox"), filepath.Join(dir, "bin", "inbox")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "contrib"), os.DirFS(filepath.Join("..", "..", "..", "contrib"))); err != nil {
		t.Fatal(err)
	}

	var script strings.Builder
	// -e stops at the first failing command; background jobs (the daemon,
	// a wait-reply) are killed when the script ends, however it ends.
	script.WriteString("set -eu -o pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n")
	for i, b := range blocks[1:] {
		script.WriteString("echo '--- README sh block " + strconv.Itoa(i+2) + "' >&2\n")
		script.WriteString(b)
	}
	// The walkthrough's tasks run on in the background after the last
	// block; fsck checks the store once they have all finished (a store
	// that is being written has temp files and entries in flight).
	script.WriteString("echo '--- tasks finish' >&2\n" +
		"for i in $(seq 600); do inbox queue --all --json | grep -q '\"queued\":\\[\\],\"running\":\\[\\]' && break; sleep 0.1; done\n" +
		"inbox queue --all --json | grep -q '\"queued\":\\[\\],\"running\":\\[\\]'\n")
	script.WriteString("echo '--- fsck' >&2\ninbox fsck\n")

	out, err := runReadmeScript(dir, script.String())
	if err != nil {
		t.Fatalf("README snippets failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	if !strings.Contains(string(out), `"woke":true`) {
		t.Errorf("the worker's wait-reply did not print the answer:\n%s", out)
	}
	for _, want := range []string{"daily.task.json.result", "daily.task.json.outcome"} {
		if _, err := os.Stat(filepath.Join(dir, ".agents", "inbox", "intake", want)); err != nil {
			t.Errorf("the daemon example left no %s: %v", want, err)
		}
	}
}

// runReadmeScript runs script in bash in dir, in a new user's
// environment (readmeEnv), for at most 3 minutes, and returns its output:
// stdout and stderr. A script that runs over is killed with every process
// it started.
func runReadmeScript(dir, script string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = readmeEnv(dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd.CombinedOutput()
}

// readmeEnv is the environment of a new user's shell: no INBOX_ settings,
// a home of its own.
func readmeEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "INBOX_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+dir)
}
