package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/testproc"
)

// The newcomer's NATS server (SPEC §14): inbox-nats server, run as the
// README runs it and killed as a crash would.

var natsBins struct {
	once sync.Once
	dir  string
	err  error
}

// natsBinaries builds inbox, inbox-nats and inbox-nats-server as the
// README's build line does, once for the package's tests, and returns the
// directory that holds them.
func natsBinaries(t *testing.T) string {
	t.Helper()
	natsBins.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			natsBins.err = fmt.Errorf("the go command is needed to build the binaries: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "nats-bins")
		if err != nil {
			natsBins.err = err
			return
		}
		build := exec.Command(goBin, "build", "-o", dir+"/", "../../inbox", "../../inbox-nats", "../../inbox-nats/inbox-nats-server")
		build.Env = append(build.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			natsBins.err = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		natsBins.dir = dir
	})
	if natsBins.err != nil {
		t.Fatal(natsBins.err)
	}
	return natsBins.dir
}

// freePort is a loopback port no one listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestNATSServerReadme runs the sh blocks of the README's NATS section in
// one bash, in order, as a reader pasting them into a new shell would, in
// a fresh directory holding the built binaries in bin/: they start the
// server with inbox-nats server and take a task through a worker's loop
// on it, with the secret's file the server made, and show a command
// without it refused. The one change to what they say is the server's
// port (4222 in the README), a free one, so that runs at once do not meet.
func TestNATSServerReadme(t *testing.T) {
	t.Parallel()
	blocks := readmeShellBlocks(t, filepath.Join("..", "..", "..", "README.md"), func(section string) bool { return section == readmeNATSSection })
	text := strings.Join(blocks, "")
	for _, want := range []string{"inbox-nats server ", "nats://127.0.0.1:4222/", "export INBOX_NATS_PASSWORD_FILE=$PWD/.agents/nats/inbox-nats-server.secret", "inbox init", "inbox send", "inbox fetch", "inbox claim", "inbox update", "inbox wait-reply", "inbox done"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the README's NATS section has no %q in its sh blocks:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "inbox-nats server "); n != 1 {
		t.Fatalf("the README's NATS section starts the server %d times, want once:\n%s", n, text)
	}
	port := strconv.Itoa(freePort(t))
	text = strings.ReplaceAll(text, "127.0.0.1:4222", "127.0.0.1:"+port)
	text = strings.Replace(text, "inbox-nats server ", "inbox-nats server --listen 127.0.0.1:"+port+" ", 1)

	bins := natsBinaries(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"inbox", "inbox-nats", "inbox-nats-server"} {
		if err := os.Symlink(filepath.Join(bins, name), filepath.Join(dir, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	// -e stops at the first failing command; the server and a wait are
	// killed when the script ends, however it ends.
	script := "set -eu -o pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + text
	out, err := runReadmeScript(dir, script)
	if err != nil {
		t.Fatalf("the README's NATS section failed: %v\n%s\n--- the script:\n%s", err, out, script)
	}
	t.Logf("%s", out)
	for _, want := range []string{`"woke":true`, "INBOX_DB=nats://127.0.0.1:" + port + "/",
		"INBOX_NATS_PASSWORD_FILE=" + filepath.Join(dir, ".agents", "nats", "inbox-nats-server.secret"),
		"the server refused a connection that gave no credentials", "exit 50"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README's NATS section printed no %q:\n%s", want, out)
		}
	}
	// The server's log: it stopped cleanly, and said so.
	if log, err := os.ReadFile(filepath.Join(dir, "nats.log")); err != nil || !strings.Contains(string(log), "inbox-nats: stopped") {
		t.Errorf("the server's log does not say it stopped (%v):\n%s", err, log)
	}
	if _, err := os.Stat(filepath.Join(dir, ".agents", "nats", "jetstream")); err != nil {
		t.Errorf("the server kept no JetStream files in .agents/nats: %v", err)
	}
}

// natsServerProc is an inbox-nats server process.
type natsServerProc struct {
	cmd        *exec.Cmd
	url        string // nats://HOST:PORT
	secretFile string // what a client's INBOX_NATS_PASSWORD_FILE names
	log        *strings.Builder
}

// env is environ with INBOX_NATS_PASSWORD_FILE naming the server's
// secret.
func (p *natsServerProc) env(environ []string) []string {
	return append(environ, inbox.EnvNATSPasswordFile+"="+p.secretFile)
}

// startNATSServer starts inbox-nats server on any free loopback port,
// storing in storeDir, and returns it once its log says where it
// listens and which file holds its secret.
func startNATSServer(t *testing.T, bins, storeDir string) *natsServerProc {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins, "inbox-nats"), "server", "--listen", "127.0.0.1:0", "--store-dir", storeDir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	testproc.Start(t, cmd)
	p := &natsServerProc{cmd: cmd, log: new(strings.Builder)}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		p.log.WriteString(line + "\n")
		if _, rest, ok := strings.Cut(line, "export INBOX_DB="); ok {
			u, rest, _ := strings.Cut(rest, " ")
			p.url = strings.TrimSuffix(u, "/myteam")
			if f, ok := strings.CutPrefix(rest, inbox.EnvNATSPasswordFile+"="); ok {
				p.secretFile, _, _ = strings.Cut(f, " ")
			}
			break
		}
	}
	if p.url == "" || p.secretFile == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("inbox-nats server never said where it listens and which file holds its secret:\n%s", p.log)
	}
	go io.Copy(io.Discard, stderr)
	return p
}

// TestNATSServerKill sends a message through a server inbox-nats server
// started, kills the server with SIGKILL once the send was acknowledged,
// starts it again on the same store directory and finds the message: the
// store directory is all a server needs to come back after a crash, and
// its lock goes with the killed process. That the server syncs every
// write (which a process kill alone cannot tell from a lazy flush) is its
// log's word here and natsserve's TestStart's, on the running server.
func TestNATSServerKill(t *testing.T) {
	t.Parallel()
	bins := natsBinaries(t)
	storeDir := filepath.Join(t.TempDir(), "nats")
	inboxBin := filepath.Join(bins, "inbox")
	var s *natsServerProc
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(inboxBin, args...)
		cmd.Env = s.env(readmeEnv(t.TempDir()))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("inbox %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}

	s = startNATSServer(t, bins, storeDir)
	if !strings.Contains(s.log.String(), "every write synced before it is acknowledged") {
		t.Errorf("the server does not say it syncs every write:\n%s", s.log)
	}
	db := s.url + "/crash"
	run("init", "--db", db)
	var sent cliOut
	out := run("send", "--db", db, "--from", "lead", "--to", "worker", "--subject", "survive", "--body", "acknowledged before the kill", "--json")
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.Thread.ThreadID == "" {
		t.Fatalf("send's output names no thread (%v): %s", err, out)
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.cmd.Wait()

	s = startNATSServer(t, bins, storeDir)
	db = s.url + "/crash"
	out = run("show", "--db", db, "--thread", sent.Thread.ThreadID, "--json")
	if !strings.Contains(out, "acknowledged before the kill") || !strings.Contains(out, sent.Message.MessageID) {
		t.Errorf("after kill -9 and a restart, show does not find the message %s:\n%s", sent.Message.MessageID, out)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("inbox-nats server stopped by SIGTERM: %v, want exit 0", err)
	}
}

// TestNATSServerAuth runs the real binaries against inbox-nats server,
// which lets in only clients that give its secret (SPEC §8, §14). Without
// it, or with another, a command exits 50 and says to set
// INBOX_NATS_PASSWORD_FILE; with the file the server's log names, init,
// send and fetch work, and so does a task, which gets a file's path, never
// the secret. The secret shows in no output, in neither the server's argv
// nor its environment, nor in the task's environment.
func TestNATSServerAuth(t *testing.T) {
	t.Parallel()
	bins := natsBinaries(t)
	work := t.TempDir()
	s := startNATSServer(t, bins, filepath.Join(work, "nats"))
	data, err := os.ReadFile(s.secretFile)
	if err != nil {
		t.Fatalf("the file the server's log names: %v", err)
	}
	secret := strings.TrimSpace(string(data))
	if secret == "" {
		t.Fatalf("the server's secret's file %s is empty", s.secretFile)
	}
	noSecret := func(what, text string) {
		t.Helper()
		if strings.Contains(text, secret) {
			t.Errorf("%s holds the server's secret:\n%s", what, text)
		}
	}
	noSecret("the server's log", s.log.String())
	db := s.url + "/auth"
	base := append(readmeEnv(filepath.Join(work, "home")), "PATH="+bins+":"+os.Getenv("PATH"), "WORK="+work)
	run := func(env []string, want int, args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bins, "inbox"), args...)
		cmd.Env = env
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		code, err := exitStatus(cmd.Run())
		if err != nil || code != want {
			t.Fatalf("inbox %s: exit %d (%v), want %d\n%s%s", strings.Join(args, " "), code, err, want, o.String(), e.String())
		}
		noSecret("inbox "+args[0]+"'s output", o.String()+e.String())
		return o.String(), e.String()
	}

	// Without the secret, or with another: refused, and told the fix.
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{name: "no credentials", env: base, want: []string{"gave no credentials", inbox.EnvNATSPasswordFile, "inbox-nats-server.secret"}},
		{name: "another token", env: append(base[:len(base):len(base)], inbox.EnvNATSPassword+"=not-the-secret"),
			want: []string{"refused the credentials", inbox.EnvNATSPasswordFile}},
	} {
		for _, args := range [][]string{{"init", "--db", db}, {"fetch", "--db", db, "--agent", "worker"}} {
			_, stderr := run(tc.env, 50, args...)
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%s: inbox %s's error does not say %q:\n%s", tc.name, args[0], w, stderr)
				}
			}
		}
		stdout, _ := run(tc.env, 50, "list", "--db", db, "--json")
		if !strings.Contains(stdout, `"ok":false`) || !strings.Contains(stdout, inbox.EnvNATSPasswordFile) {
			t.Errorf("%s: inbox list --json's error does not name %s:\n%s", tc.name, inbox.EnvNATSPasswordFile, stdout)
		}
	}

	// With the file the server's log names: the store works.
	env := s.env(base)
	run(env, 0, "init", "--db", db)
	out, _ := run(env, 0, "send", "--db", db, "--from", "lead", "--to", "worker", "--subject", "behind the secret", "--body", "b", "--json")
	var sent cliOut
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.Thread.ThreadID == "" {
		t.Fatalf("send's output names no thread (%v): %s", err, out)
	}
	if out, _ := run(env, 0, "fetch", "--db", db, "--agent", "worker", "--json"); !strings.Contains(out, sent.Thread.ThreadID) {
		t.Errorf("fetch does not list the thread %s:\n%s", sent.Thread.ThreadID, out)
	}

	// A task uses the store through a file its runner names, with the
	// secret in neither its environment nor its runner's argv.
	task := filepath.Join(work, "task.sh")
	if err := os.WriteFile(task, []byte(`env > "$WORK/task.env"
tr '\0' ' ' < /proc/$PPID/cmdline > "$WORK/runner.argv"
inbox send main 'a note from the task' >/dev/null || exit 1
printf ok
`), 0o600); err != nil {
		t.Fatal(err)
	}
	run(env, 0, "push", "--db", db, "--name", "t1", "do it")
	run(env, 0, "run", "--db", db, "--exec", "sh "+task)
	got := map[string]string{}
	for range 2 {
		out, _ := run(env, 0, "receive", "--db", db, "--agent", "main", "--timeout-seconds", "60", "--json")
		var r struct {
			Message struct{ Kind, Body string }
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("receive: %v\n%s", err, out)
		}
		got[r.Message.Kind] = r.Message.Body
	}
	if got["result"] != "ok" || got["progress"] != "a note from the task" {
		t.Errorf("the task's messages: %v, want its note and its result ok", got)
	}
	taskEnv, err := os.ReadFile(filepath.Join(work, "task.env"))
	if err != nil {
		t.Fatal(err)
	}
	noSecret("the task's environment", string(taskEnv))
	if !strings.Contains(string(taskEnv), inbox.EnvNATSPasswordFile+"=") {
		t.Errorf("the task's environment names no %s:\n%s", inbox.EnvNATSPasswordFile, taskEnv)
	}
	argv, err := os.ReadFile(filepath.Join(work, "runner.argv"))
	if err != nil || len(argv) == 0 {
		t.Errorf("the task did not read its runner's argv: %v", err)
	}
	noSecret("the runner's argv", string(argv))

	// The server process itself: its argv and environment.
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", s.cmd.Process.Pid, f))
		if err != nil {
			t.Fatal(err)
		}
		noSecret("the server's "+f, string(b))
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("inbox-nats server stopped by SIGTERM: %v, want exit 0", err)
	}
}
