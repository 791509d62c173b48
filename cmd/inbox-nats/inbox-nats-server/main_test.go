package main

import (
	"bytes"
	"net"
	"os"
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
			"export INBOX_DB=nats://127.0.0.1:", "inbox-nats: stopped"}},
		{name: "every interface", args: []string{"--listen", "0.0.0.0:0", "--store-dir", dir}, code: 0, stderr: []string{
			"inbox-nats: warning: 0.0.0.0:0 is reachable from other machines and has no authentication"}},
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
		})
	}
}
