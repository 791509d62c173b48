package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/inbox-dev/inbox/internal/natsserve"
)

// lockedBuffer is a stderr the server's goroutines and the command share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serve runs the command with args; a SIGTERM waits for it from the start,
// so a server that starts stops at once.
func serve(args ...string) (code int, stdout, stderr string) {
	sig := make(chan os.Signal, 1)
	sig <- syscall.SIGTERM
	var out bytes.Buffer
	var errs lockedBuffer
	code = runServer(args, &out, &errs, sig)
	return code, out.String(), errs.String()
}

func TestRunServer(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := t.TempDir()
	other, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: held})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	spaced := filepath.Join(t.TempDir(), "store dir")
	planted := t.TempDir()
	if err := os.Symlink(filepath.Join(t.TempDir(), "known"), filepath.Join(planted, natsserve.SecretFile)); err != nil {
		t.Fatal(err)
	}
	readable := t.TempDir()
	if err := os.WriteFile(filepath.Join(readable, natsserve.SecretFile), []byte("read-by-all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(readable, natsserve.SecretFile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{name: "help", args: []string{"--help"}, code: 0, stdout: "sync_interval: always"},
		{name: "unknown flag", args: []string{"--port", "1"}, code: 30, stderr: []string{"inbox-nats: error: unknown flag: --port"}},
		{name: "argument", args: []string{"now"}, code: 30, stderr: []string{"takes no arguments"}},
		{name: "bad listen", args: []string{"--listen", "4222"}, code: 30, stderr: []string{"inbox-nats: error: --listen"}},
		{name: "address taken", args: []string{"--listen", l.Addr().String(), "--store-dir", t.TempDir()}, code: 50, stderr: []string{"inbox-nats: error: start the NATS server"}},
		{name: "store directory in use", args: []string{"--listen", "127.0.0.1:0", "--store-dir", held}, code: 20, stderr: []string{"another server uses this store directory"}},
		{name: "runs and stops", args: []string{"--listen", "127.0.0.1:0", "--store-dir", dir}, code: 0, stderr: []string{
			"inbox-nats: listening on nats://127.0.0.1:", "every write synced before it is acknowledged",
			"export INBOX_DB=nats://127.0.0.1:", "/myteam INBOX_NATS_PASSWORD_FILE=" + filepath.Join(dir, natsserve.SecretFile) + " && inbox init",
			"inbox-nats: stopped"}},
		{name: "every interface", args: []string{"--listen", "0.0.0.0:0", "--store-dir", dir}, code: 0, stderr: []string{
			"inbox-nats: warning: 0.0.0.0:0 is reachable from other machines, and has no TLS: the secret and every message cross the network in clear",
			"INBOX_NATS_PASSWORD_FILE=" + filepath.Join(dir, natsserve.SecretFile)}},
		{name: "a path to quote", args: []string{"--listen", "127.0.0.1:0", "--store-dir", spaced}, code: 0, stderr: []string{
			"INBOX_NATS_PASSWORD_FILE='" + filepath.Join(spaced, natsserve.SecretFile) + "' && inbox init"}},
		{name: "planted secret", args: []string{"--listen", "127.0.0.1:0", "--store-dir", planted}, code: 50, stderr: []string{
			"inbox-nats: error: the server's secret file " + filepath.Join(planted, natsserve.SecretFile) + " is not a regular file (a symlink)", "remove it"}},
		{name: "secret others can read", args: []string{"--listen", "127.0.0.1:0", "--store-dir", readable}, code: 50, stderr: []string{
			"inbox-nats: error: the server's secret file " + filepath.Join(readable, natsserve.SecretFile) + " can be read by others (mode 0644)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := serve(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, stderr)
			}
			if !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout has no %q:\n%s", tc.stdout, stdout)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr has no %q:\n%s", want, stderr)
				}
			}
			if strings.Contains(stderr, "read-by-all") {
				t.Errorf("stderr holds the secret of the file it refused:\n%s", stderr)
			}
		})
	}
}

// TestRunServerSecret checks what the server says of its secret, also
// with --verbose: the file that holds it, and never the secret.
func TestRunServerSecret(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := serve("--listen", "127.0.0.1:0", "--store-dir", dir, "--verbose")
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, natsserve.SecretFile))
	if err != nil {
		t.Fatalf("the server left no secret's file: %v\n%s", err, stderr)
	}
	secret := strings.TrimSpace(string(data))
	if secret == "" || strings.Contains(stderr, secret) {
		t.Errorf("the log holds the secret %q (or there is none):\n%s", secret, stderr)
	}
	if !strings.Contains(stderr, "Server is ready") {
		t.Errorf("--verbose logged none of the NATS server's notices, so the check above looked at little:\n%s", stderr)
	}
}

// TestShellQuote checks that the path the hint names reads back, as a
// shell word, as itself.
func TestShellQuote(t *testing.T) {
	for _, p := range []string{"/home/a/.agents/nats/inbox-nats-server.secret", "/tmp/store dir/f", "/tmp/it's/f", "/tmp/$HOME/`x`/f", "/tmp/a\\b/f"} {
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(p)).Output()
		if err != nil || string(out) != p {
			t.Errorf("sh reads %s as %q (%v), want %q", shellQuote(p), out, err, p)
		}
	}
	if got := shellQuote("/a/b.secret"); got != "/a/b.secret" {
		t.Errorf("shellQuote(/a/b.secret) = %s, want it unquoted", got)
	}
}
