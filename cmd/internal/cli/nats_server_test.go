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
// on it. The one change to what they say is the server's port (4222 in
// the README), a free one, so that runs at once do not meet.
func TestNATSServerReadme(t *testing.T) {
	t.Parallel()
	blocks := readmeShellBlocks(t, filepath.Join("..", "..", "..", "README.md"), func(section string) bool { return section == readmeNATSSection })
	text := strings.Join(blocks, "")
	for _, want := range []string{"inbox-nats server ", "nats://127.0.0.1:4222/", "inbox init", "inbox send", "inbox fetch", "inbox claim", "inbox update", "inbox wait-reply", "inbox done"} {
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
	for _, want := range []string{`"woke":true`, "INBOX_DB=nats://127.0.0.1:" + port + "/"} {
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
	cmd *exec.Cmd
	url string // nats://HOST:PORT
	log *strings.Builder
}

// startNATSServer starts inbox-nats server on any free loopback port,
// storing in storeDir, and returns it once its log says where it
// listens.
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
			u, _, _ := strings.Cut(rest, " ")
			p.url = strings.TrimSuffix(u, "/myteam")
			break
		}
	}
	if p.url == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("inbox-nats server never said where it listens:\n%s", p.log)
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
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(inboxBin, args...)
		cmd.Env = readmeEnv(t.TempDir())
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("inbox %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}

	s := startNATSServer(t, bins, storeDir)
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
