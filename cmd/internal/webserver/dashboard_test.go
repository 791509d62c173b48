package webserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// What the browser tests and benchmarks share: stores made with the real
// CLI, and inbox web started as a process, as a person starts it.

// inboxCLI runs the CLI with --json on db and returns its output decoded;
// it fails tb unless the exit code is 0.
func inboxCLI(tb testing.TB, db string, args ...string) map[string]any {
	tb.Helper()
	cmd := exec.Command(testproc.Installed(tb, "inbox"), append(args, "--db", db, "--json")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("inbox %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		tb.Fatalf("inbox %s printed no JSON object: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v
}

// threadOf is the thread id in a CLI result ({"thread":{"thread_id":…}}).
func threadOf(tb testing.TB, v map[string]any) string {
	tb.Helper()
	th, _ := v["thread"].(map[string]any)
	id, _ := th["thread_id"].(string)
	if id == "" {
		tb.Fatalf("no thread id in %v", v)
	}
	return id
}

// newStore is a new directory store, initialised with the CLI.
func newStore(tb testing.TB) string {
	tb.Helper()
	db := filepath.Join(tb.TempDir(), "store")
	inboxCLI(tb, db, "init")
	return db
}

// dashboard is a running inbox web process.
type dashboard struct {
	cmd *exec.Cmd
	// url is the launch URL it printed (with ?token=, good for one
	// visit), base its origin with no path (http://127.0.0.1:PORT).
	url, base, token string
	tokenFile        string
	stderr           *lockedBuffer
	exited           chan struct{}
}

// startDashboard starts inbox web on db, on a free loopback port, and
// waits for its first line: {"ok":true,"command":"web","url":…}.
func startDashboard(tb testing.TB, db string, args ...string) *dashboard {
	tb.Helper()
	return startDashboardEnv(tb, db, nil, args...)
}

// startDashboardEnv is startDashboard with env added to its environment.
func startDashboardEnv(tb testing.TB, db string, env []string, args ...string) *dashboard {
	tb.Helper()
	cmd := exec.Command(testproc.Installed(tb, "inbox"),
		append([]string{"web", "--db", db, "--addr", "127.0.0.1:0", "--json"}, args...)...)
	cmd.Env = append(append(os.Environ(), "INBOX_AGENT="), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	d := &dashboard{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { cmd.Wait(); close(d.exited) }()
	tb.Cleanup(func() { d.stop(tb) })
	first := make(chan []byte, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- append([]byte(nil), sc.Bytes()...)
		}
		close(first)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-first:
		if !ok {
			<-d.exited
			tb.Fatalf("inbox web ended without a first line; stderr:\n%s", d.stderr)
		}
		var v struct {
			OK        bool   `json:"ok"`
			Command   string `json:"command"`
			URL       string `json:"url"`
			Token     string `json:"token"`
			TokenFile string `json:"token_file"`
		}
		if err := json.Unmarshal(line, &v); err != nil || !v.OK || v.Command != "web" || v.Token == "" {
			tb.Fatalf("first line of inbox web: %s (%v)", line, err)
		}
		base, _, ok := strings.Cut(v.URL, "/?token=")
		if !ok {
			tb.Fatalf("inbox web's URL %q carries no ?token=", v.URL)
		}
		d.url, d.base, d.token, d.tokenFile = v.URL, base, v.Token, v.TokenFile
	case <-time.After(60 * time.Second):
		tb.Fatalf("inbox web did not start within 60 s; stderr:\n%s", d.stderr)
	}
	return d
}

// stop ends the server with SIGTERM and waits for it (again: nothing).
func (d *dashboard) stop(tb testing.TB) {
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		tb.Errorf("inbox web did not stop within 10 s of SIGTERM")
	}
}

// launch is a new launch URL (POST /api/launch with the token): the
// printed one opens one browser, once.
func (d *dashboard) launch(tb testing.TB) string {
	tb.Helper()
	code, body := d.do(tb, http.MethodPost, "/api/launch", "")
	var v struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(body, &v); code != http.StatusOK || err != nil || !strings.HasPrefix(v.URL, d.base+"/?token=") {
		tb.Fatalf("POST /api/launch: %d %s", code, body)
	}
	return v.URL
}

// get sends GET path with the token as a bearer token and the headers
// hdr (name, value, …), and returns the status and body.
func (d *dashboard) get(tb testing.TB, path string, hdr ...string) (int, []byte) {
	tb.Helper()
	return d.do(tb, http.MethodGet, path, "", hdr...)
}

// do sends a request with the token as a bearer token and the headers hdr
// (name, value, …: a Host sets the request's host, an empty value drops
// the header), and returns the status and body.
func (d *dashboard) do(tb testing.TB, method, path, body string, hdr ...string) (int, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	for i := 0; i+1 < len(hdr); i += 2 {
		switch {
		case hdr[i] == "Host":
			req.Host = hdr[i+1]
		case hdr[i+1] == "":
			req.Header.Del(hdr[i])
		default:
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// peakRSS is the server's peak resident set (VmHWM) in bytes.
func (d *dashboard) peakRSS(tb testing.TB) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no VmHWM in /proc/%d/status", d.cmd.Process.Pid)
	return 0
}

// lockedBuffer is a process's stderr, written by exec's copier while a
// test reads it for a failure message.
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
