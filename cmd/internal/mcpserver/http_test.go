package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inbox-dev/inbox/cmd/internal/localhttp/localhttptest"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// Process tests of `inbox mcp --http` (SPEC §12): the real binary on a
// real socket, and the requests it must refuse. The server is only as
// open as the store: a bearer token from an owner-only file, loopback
// origins only, idle sessions closed, and no command taken from a tool
// call.

// httpServer is an `inbox mcp --http` process.
type httpServer struct {
	t         *testing.T
	cmd       *exec.Cmd
	url       string // http://127.0.0.1:PORT/mcp
	tokenFile string
	token     string
	lines     chan string // stderr, line by line, after the start-up lines

	mu     sync.Mutex
	stderr strings.Builder // all of stderr, for failure messages
}

var (
	listeningLine = regexp.MustCompile(`listening on (http://127\.0\.0\.1:[0-9]+/mcp)$`)
	tokenLine     = regexp.MustCompile(`token file (.+) \(send`)
)

// startHTTP starts inbox mcp --http on a free loopback port of store db,
// with --exec cat (a task's result is its prompt) and args, and waits for
// it to say where it listens and where its token is.
func startHTTP(t *testing.T, db string, args ...string) *httpServer {
	t.Helper()
	cmd := exec.Command(testproc.Installed(t, "inbox"), append([]string{"mcp", "--db", db, "--agent", "main",
		"--http", "127.0.0.1:0", "--exec", "cat"}, args...)...)
	cmd.Env = append(os.Environ(), "INBOX_EXEC=")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &httpServer{t: t, cmd: cmd, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("inbox mcp --http did not stop on SIGTERM\n%s", s.log())
		}
	})
	s.url = s.waitLine(listeningLine)[1]
	s.tokenFile = s.waitLine(tokenLine)[1]
	tok, err := os.ReadFile(s.tokenFile)
	if err != nil {
		t.Fatalf("the token file the server named: %v", err)
	}
	s.token = strings.TrimSpace(string(tok))
	return s
}

// log is the server's stderr so far.
func (s *httpServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// waitLine waits (at most 20 s) for a stderr line matching re and
// returns its submatches.
func (s *httpServer) waitLine(re *regexp.Regexp) []string {
	s.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("inbox mcp --http ended before saying %q:\n%s", re, s.log())
			}
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			s.t.Fatalf("inbox mcp --http did not say %q within 20 s:\n%s", re, s.log())
		}
	}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// post sends one JSON-RPC message as a streamable HTTP client would, with
// the headers hdr ("Host" sets the request's host), and returns the
// response with its body read.
func (s *httpServer) post(hdr map[string]string, body string) (*http.Response, string) {
	s.t.Helper()
	resp, data, err := postMCP(s.url, hdr, body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp, data
}

func postMCP(url string, hdr map[string]string, body string) (*http.Response, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp, string(data), err
}

func (s *httpServer) bearer() string { return "Bearer " + s.token }

// headerTransport adds headers to every request of a client.
type headerTransport struct{ hdr http.Header }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.hdr {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// client connects the SDK's streamable HTTP client with the token.
func (s *httpServer) client() *mcp.ClientSession {
	s.t.Helper()
	hc := &http.Client{Transport: headerTransport{http.Header{"Authorization": {s.bearer()}}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		s.t.Fatalf("connect with the token: %v\n%s", err, s.log())
	}
	s.t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and returns its structured result.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	return out, res.IsError
}

// TestHTTPNeedsToken: every request needs the bearer token the server
// wrote to its token file (0600, owned by the server's user); none, a
// wrong one or another scheme is 401. The file goes when the server does.
func TestHTTPNeedsToken(t *testing.T) {
	_, db := storetest.New(t, spool.Options{})
	s := startHTTP(t, db)
	if want := filepath.Join(db, "mcp.token"); s.tokenFile != want {
		t.Errorf("token file %s, want %s (inside the store)", s.tokenFile, want)
	}
	fi, err := os.Lstat(s.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want a regular file 0600", fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
		t.Errorf("token file owned by uid %d, want %d (the server's)", st.Uid, os.Getuid())
	}
	if len(s.token) < 32 {
		t.Errorf("token %q: too short to be a secret", s.token)
	}
	for _, c := range []struct {
		name, auth string
	}{
		{"no token", ""},
		{"wrong token", "Bearer " + strings.Repeat("0", len(s.token))},
		{"token and more", s.bearer() + "x"},
		{"a prefix of it", "Bearer " + s.token[:len(s.token)-1]},
		{"another scheme", "Basic " + s.token},
	} {
		hdr := map[string]string{}
		if c.auth != "" {
			hdr["Authorization"] = c.auth
		}
		if resp, body := s.post(hdr, initializeBody); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401: %s", c.name, resp.StatusCode, body)
		}
	}
	resp, body := s.post(map[string]string{"Authorization": s.bearer()}, initializeBody)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || !strings.Contains(body, `"protocolVersion"`) {
		t.Fatalf("with the token: status %d, session %q: %s", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), body)
	}
	// A session opened with the token still needs it on every request.
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp, body := s.post(map[string]string{"Mcp-Session-Id": sid}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a session's request without the token: status %d, want 401: %s", resp.StatusCode, body)
	}
	// The SDK's client, given the token, uses the tools.
	cs := s.client()
	if out, isErr := callTool(t, cs, "agents", nil); isErr || out["ok"] != true {
		t.Fatalf("agents with the token: %v", out)
	}
	// Stopping the server removes its token file.
	s.cmd.Process.Signal(syscall.SIGTERM)
	for range s.lines {
	}
	if _, err := os.Lstat(s.tokenFile); !os.IsNotExist(err) {
		t.Errorf("the token file is still there after the server stopped: %v", err)
	}
}

// TestHTTPOrigin: a request whose Origin is not a loopback origin is
// refused (403), token or not, as is a foreign Host; loopback origins
// with the token are served.
func TestHTTPOrigin(t *testing.T) {
	_, db := storetest.New(t, spool.Options{})
	s := startHTTP(t, db)
	port := s.url[len("http://127.0.0.1:") : len(s.url)-len("/mcp")]
	for _, origin := range []string{"http://evil.example", "https://evil.example:" + port, "null", "http://127.0.0.1.evil.example:" + port,
		"file://", ""} {
		resp, body := s.post(map[string]string{"Authorization": s.bearer(), "Origin": origin}, initializeBody)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("Origin %q: status %d, want 403: %s", origin, resp.StatusCode, body)
		}
	}
	if resp, body := s.post(map[string]string{"Origin": "http://evil.example"}, initializeBody); resp.StatusCode != http.StatusForbidden {
		t.Errorf("evil Origin without the token: status %d, want 403: %s", resp.StatusCode, body)
	}
	if resp, body := s.post(map[string]string{"Authorization": s.bearer(), "Host": "evil.example:" + port}, initializeBody); resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: status %d, want 403: %s", resp.StatusCode, body)
	}
	for _, origin := range []string{"http://127.0.0.1:" + port, "http://localhost:5173", "http://[::1]:8080", "http://localhost"} {
		resp, body := s.post(map[string]string{"Authorization": s.bearer(), "Origin": origin}, initializeBody)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Origin %q with the token: status %d, want 200: %s", origin, resp.StatusCode, body)
		}
	}
}

// TestHTTPRunTakesNoCommand: the run tool has no exec input; a call that
// passes one is refused as invalid input naming the field, and nothing
// runs. run without it uses the server's --exec.
func TestHTTPRunTakesNoCommand(t *testing.T) {
	_, db := storetest.New(t, spool.Options{})
	s := startHTTP(t, db)
	cs := s.client()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if b, _ := json.Marshal(tool.InputSchema); tool.Name == "run" && strings.Contains(string(b), `"exec"`) {
			t.Errorf("the run tool still takes exec: %s", b)
		}
	}
	if out, isErr := callTool(t, cs, "push", map[string]any{"name": "job", "prompt": "hello"}); isErr {
		t.Fatalf("push: %v", out)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	out, isErr := callTool(t, cs, "run", map[string]any{"exec": "id > " + marker})
	if !isErr || out["ok"] != false || get(out, "error.code") != "invalid_input" || get(out, "error.field") != "exec" ||
		!strings.Contains(fmt.Sprint(get(out, "error.message")), "--exec") {
		t.Errorf("run with exec: %v (isError %v), want invalid_input naming exec", out, isErr)
	}
	if _, err := os.Lstat(marker); !os.IsNotExist(err) {
		t.Errorf("the command given in the tool call ran: %v", err)
	}
	if q, _ := callTool(t, cs, "queue", nil); len(q["queued"].([]any)) != 1 {
		t.Errorf("the task left the queue on a refused run: %v", q)
	}
	// Empty, it is refused too: the field is not the server's to take.
	if out, isErr := callTool(t, cs, "run", map[string]any{"exec": ""}); !isErr || get(out, "error.field") != "exec" {
		t.Errorf("run with an empty exec: %v", out)
	}
}

// TestHTTPRunLeavesNoZombie: a run's detached runner is the server's
// child; once the task's result is in the mailbox and the runner exits,
// the server has reaped it.
func TestHTTPRunLeavesNoZombie(t *testing.T) {
	_, db := storetest.New(t, spool.Options{})
	s := startHTTP(t, db)
	cs := s.client()
	callTool(t, cs, "push", map[string]any{"name": "echo", "prompt": "the prompt"})
	ran, isErr := callTool(t, cs, "run", nil)
	if isErr {
		t.Fatalf("run: %v", ran)
	}
	runner := int(ran["runner_pid"].(float64))
	res, _ := callTool(t, cs, "receive", map[string]any{"from": "echo", "max_wait_seconds": 30})
	if res["woke"] != true || get(res, "message.body") != "the prompt" {
		t.Fatalf("the task's result: %v", res)
	}
	// The runner exits once it has delivered the result: poll the server's
	// children (another process's state) until it is gone.
	server := s.cmd.Process.Pid
	deadline := time.Now().Add(15 * time.Second)
	for {
		kids := children(server)
		state, there := kids[runner]
		if !there {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runner (pid %d) is still the server's child in state %c, 15 s after its result", runner, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for pid, state := range children(server) {
		if state == 'Z' {
			t.Errorf("pid %d is a zombie child of the server", pid)
		}
	}
}

// children maps the children of pid to their states (R, S, Z, …), from
// /proc.
func children(pid int) map[int]byte {
	out := map[int]byte{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := strings.LastIndexByte(string(stat), ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out[child] = f[0][0]
		}
	}
	return out
}

// TestHTTPIdleSessionExpires: a session idle past --idle-timeout is
// closed (the server says so on stderr) and its id is then unknown (404).
func TestHTTPIdleSessionExpires(t *testing.T) {
	_, db := storetest.New(t, spool.Options{})
	s := startHTTP(t, db, "--idle-timeout", "1s")
	resp, body := s.post(map[string]string{"Authorization": s.bearer()}, initializeBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	s.waitLine(regexp.MustCompile(`session ` + regexp.QuoteMeta(sid) + ` ended`))
	// The session has ended; the SDK forgets its id in the close hook that
	// runs just after, so a request in between may still find it, closed.
	// Ask until the id is unknown (bounded: the server's own state).
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body = s.post(map[string]string{"Authorization": s.bearer(), "Mcp-Session-Id": sid},
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if resp.StatusCode == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a request on the expired session: %d %s, want 404", resp.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTPOtherUserRefused: another local user (uid 65534) cannot read
// the token file, even in a directory it can enter, and without the
// token neither initialize nor a tool call gets through.
func TestHTTPOtherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("starting a process as another uid needs root")
	}
	_, db := storetest.New(t, spool.Options{})
	// A directory every user may enter and read, for the token file and
	// the probe: only the file's own mode keeps the token.
	open, err := os.MkdirTemp("", "mcp-http-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startHTTP(t, db, "--token-file", filepath.Join(open, "mcp.token"))
	probe := filepath.Join(open, "mcp-probe")
	data, err := os.ReadFile(testproc.Installed(t, "mcp-probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(probe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(probe, s.url, s.tokenFile)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the probe as uid 65534: %v\n%s", err, stderr.String())
	}
	var got probeResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("probe output %s: %v", out, err)
	}
	if got.UID != 65534 {
		t.Fatalf("the probe ran as uid %d", got.UID)
	}
	if got.Token != "" || !strings.Contains(got.ReadError, "permission denied") {
		t.Errorf("uid 65534 read the token file: %+v", got)
	}
	for what, status := range map[string]int{"initialize": got.Initialize, "initialize with a guessed token": got.Guess,
		"tools/call run with a command": got.Run, "with what it read": got.WithRead} {
		if status != http.StatusUnauthorized {
			t.Errorf("uid 65534, %s: status %d, want 401", what, status)
		}
	}
}

// probeResult is what mcp-probe reports.
type probeResult struct {
	UID        int    `json:"uid"`
	Token      string `json:"token"`
	ReadError  string `json:"read_error"`
	Initialize int    `json:"initialize"`
	Guess      int    `json:"guess"`
	Run        int    `json:"run"`
	WithRead   int    `json:"with_read"`
}

// probeMain is mcp-probe URL TOKENFILE, run as another user: it tries to
// read the token file and to use the server with whatever it has.
func probeMain() {
	url, tokenFile := os.Args[1], os.Args[2]
	r := probeResult{UID: os.Getuid(), WithRead: http.StatusUnauthorized}
	if b, err := os.ReadFile(tokenFile); err != nil {
		r.ReadError = err.Error()
	} else {
		r.Token = string(b)
	}
	status := func(auth, body string) int {
		hdr := map[string]string{}
		if auth != "" {
			hdr["Authorization"] = auth
		}
		resp, _, err := postMCP(url, hdr, body)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return resp.StatusCode
	}
	r.Initialize = status("", initializeBody)
	r.Guess = status("Bearer "+strings.Repeat("a", 64), initializeBody)
	r.Run = status("", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run","arguments":{"exec":"id > /tmp/x"}}}`)
	if r.Token != "" {
		r.WithRead = status("Bearer "+strings.TrimSpace(r.Token), initializeBody)
	}
	json.NewEncoder(os.Stdout).Encode(r)
}

// TestHTTPConnectionFlood: a local user without the token who keeps
// 20,000 connections open, each after a request refused with 401, does
// not lock the owner out: an initialize with the token is answered.
func TestHTTPConnectionFlood(t *testing.T) {
	_, db := storetest.New(t, spool.Options{})
	s := startHTTP(t, db)
	addr := strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp")
	localhttptest.Flood(t, addr, 20_000, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: "+strconv.Itoa(len(initializeBody))+"\r\n\r\n"+initializeBody)
	st, body := localhttptest.OwnerRequest(t, func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(initializeBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", s.bearer())
		return req
	})
	if st != http.StatusOK || !strings.Contains(body, `"protocolVersion"`) {
		t.Errorf("the owner's initialize during the flood: %d %s", st, body)
	}
}
