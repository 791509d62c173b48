package webserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/natstest"
)

// backends runs f on a directory store and on a NATS store, each new
// and initialised with the CLI.
func backends(t *testing.T, f func(t *testing.T, db string)) {
	t.Run("dir", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "store")
		run(t, db, "init")
		f(t, db)
	})
	t.Run("nats", func(t *testing.T) {
		db := natstest.Store(natstest.Start(t), "web")
		run(t, db, "init")
		f(t, db)
	})
}

// run runs the CLI with --json on db and returns its stdout; it fails the
// test on an exit code other than 0 or 10.
func run(t *testing.T, db string, args ...string) []byte {
	t.Helper()
	out, code := runCode(t, db, args...)
	if code != 0 && code != 10 {
		t.Fatalf("inbox %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func runCode(t *testing.T, db string, args ...string) ([]byte, int) {
	t.Helper()
	cmd := exec.Command("inbox", append(args, "--db", db, "--json")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("inbox %s: %v", strings.Join(args, " "), err)
	}
	return out, code
}

// jget reads the value at a dotted path of a JSON document.
func jget(t *testing.T, doc []byte, path string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, _ := strconv.Atoi(k)
			if i >= len(x) {
				t.Fatalf("%s: index %d out of %d in %s", path, i, len(x), doc)
			}
			v = x[i]
		}
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sameJSON fails the test unless a and b are the same JSON value.
func sameJSON(t *testing.T, what string, a, b []byte) {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: API answer is not JSON: %v\n%s", what, err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: CLI answer is not JSON: %v\n%s", what, err, b)
	}
	if !reflect.DeepEqual(x, y) {
		t.Errorf("%s: API and CLI differ\nAPI: %s\nCLI: %s", what, a, b)
	}
}

// fill makes a small store: a blocked thread of w1's, a done one, a team,
// a message to search for, a queued task.
func fill(t *testing.T, db string) (blocked, done string) {
	t.Helper()
	blocked = jget(t, run(t, db, "send", "--from", "lead", "--to", "w1", "--subject", "migrate the schema", "--body", "postgres please"), "thread.thread_id")
	run(t, db, "claim", "--agent", "w1", "--thread", blocked)
	run(t, db, "update", "--agent", "w1", "--thread", blocked, "--status", "blocked", "--summary", "which database?")
	done = jget(t, run(t, db, "send", "--from", "lead", "--to", "w2", "--subject", "write the docs", "--run", "r7", "--task", "T2"), "thread.thread_id")
	run(t, db, "claim", "--agent", "w2", "--thread", done)
	run(t, db, "done", "--agent", "w2", "--thread", done, "--summary", "docs written")
	run(t, db, "team", "create", "core", "--member", "w1", "--member", "w2", "--agent", "lead")
	run(t, db, "push", "--agent", "lead", "--name", "lint", "check the style")
	return blocked, done
}

// TestAPIMatchesCLI checks every read endpoint against the CLI command it
// stands for, on both backends, and the errors' statuses.
func TestAPIMatchesCLI(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		blocked, done := fill(t, db)
		w := startDashboard(t, db)
		for _, c := range []struct {
			path string
			cli  []string
		}{
			{"/api/agents", []string{"agents"}},
			{"/api/threads", []string{"list"}},
			{"/api/threads?status=blocked", []string{"list", "--status", "blocked"}},
			{"/api/threads?status=done&status=blocked&limit=1", []string{"list", "--status", "done,blocked", "--limit", "1"}},
			{"/api/threads?assigned_to=w2", []string{"list", "--assigned-to", "w2"}},
			{"/api/threads?run=r7&task=T2", []string{"list", "--run", "r7", "--task", "T2"}},
			{"/api/threads?team=core&mail=true", []string{"list", "--team", "core", "--mail"}},
			{"/api/threads/" + blocked, []string{"show", "--thread", blocked}},
			{"/api/threads/" + done + "/events", []string{"events", "--thread", done}},
			{"/api/queue", []string{"queue", "--all"}},
			{"/api/teams", []string{"team", "list"}},
			{"/api/search?q=postgres", []string{"search", "postgres"}},
			{"/api/search?q=nothing+like+it", []string{"search", "nothing like it"}},
			{"/api/search?q=which&kind=question&limit=5", []string{"search", "which", "--kind", "question", "--limit", "5"}},
			{"/api/events?limit=3", []string{"events", "--limit", "3"}},
		} {
			status, got := w.do(t, "GET", c.path, "")
			if status != http.StatusOK {
				t.Errorf("GET %s: %d %s", c.path, status, got)
				continue
			}
			sameJSON(t, "GET "+c.path, got, run(t, db, c.cli...))
		}
		for _, c := range []struct {
			path   string
			status int
			code   string
		}{
			{"/api/threads/thr_01aaaaaaaaaaaaaaaaaaaaaaaa", 404, "not_found"},
			{"/api/threads/bad..id", 400, "invalid_input"},
			{"/api/threads?status=bogus", 400, "invalid_input"},
			{"/api/threads?colour=red", 400, "invalid_input"},
			{"/api/threads?limit=-1", 400, "invalid_input"},
			{"/api/search?q=", 400, "invalid_input"},
			{"/api/nothing", 404, "not_found"},
		} {
			status, got := w.do(t, "GET", c.path, "")
			if status != c.status || jget(t, got, "ok") != "false" || jget(t, got, "error.code") != c.code {
				t.Errorf("GET %s: %d %s, want %d with error.code %s", c.path, status, got, c.status, c.code)
			}
		}
	})
}

// TestAPIActions answers and cancels through the API: the CLI's JSON,
// and its exit code as the HTTP status.
func TestAPIActions(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		blocked, done := fill(t, db)
		w := startDashboard(t, db, "--as", "boss")
		status, got := w.do(t, "POST", "/api/threads/"+blocked+"/answer", `{"summary":"use postgres","body":"version 16"}`)
		if status != 200 || jget(t, got, "command") != "reply" || jget(t, got, "message.kind") != "answer" ||
			jget(t, got, "message.from_agent") != "boss" || jget(t, got, "message.summary") != "use postgres" {
			t.Fatalf("answer: %d %s", status, got)
		}
		// The worker's wait-reply sees it.
		if w := run(t, db, "wait-reply", "--agent", "w1", "--thread", blocked, "--timeout-seconds", "5"); jget(t, w, "message.body") != "version 16" {
			t.Errorf("wait-reply after the answer: %s", w)
		}
		status, got = w.do(t, "POST", "/api/threads/"+blocked+"/answer", `{"from":"alice","summary":"or sqlite"}`)
		if status != 200 || jget(t, got, "message.from_agent") != "alice" {
			t.Errorf("answer from alice: %d %s", status, got)
		}
		for _, c := range []struct {
			path, body string
			status     int
			code       string
		}{
			{"/api/threads/" + blocked + "/answer", `{"summary":"x","colour":"red"}`, 400, "invalid_input"},
			{"/api/threads/" + blocked + "/answer", `not json`, 400, "invalid_input"},
			{"/api/threads/" + blocked + "/answer", `{}`, 400, "invalid_input"},
			{"/api/threads/" + blocked + "/answer", `{"from":"../x","summary":"x"}`, 400, "invalid_input"},
			{"/api/threads/thr_01aaaaaaaaaaaaaaaaaaaaaaaa/answer", `{"summary":"x"}`, 404, "not_found"},
			{"/api/threads/thr_01aaaaaaaaaaaaaaaaaaaaaaaa/cancel", `{"reason":"x"}`, 404, "not_found"},
			{"/api/threads/" + done + "/cancel", `{"reason":"too late"}`, 400, "invalid_state"},
		} {
			status, got := w.do(t, "POST", c.path, c.body)
			if status != c.status || jget(t, got, "error.code") != c.code {
				t.Errorf("POST %s %s: %d %s, want %d with error.code %s", c.path, c.body, status, got, c.status, c.code)
			}
		}
		status, got = w.do(t, "POST", "/api/threads/"+blocked+"/cancel", `{"reason":"not needed"}`)
		if status != 200 || jget(t, got, "thread.status") != "cancelled" || jget(t, got, "message.from_agent") != "boss" {
			t.Errorf("cancel: %d %s", status, got)
		}
		// Only those two change anything: any other method is refused.
		if status, _ := w.do(t, "DELETE", "/api/threads/"+blocked, ""); status != http.StatusMethodNotAllowed && status != 404 {
			t.Errorf("DELETE a thread: %d", status)
		}
	})
}

// TestAPIAccess checks the token, the launch URLs and sessions, Host and
// Origin.
func TestAPIAccess(t *testing.T) {
	db := filepath.Join(t.TempDir(), "store")
	run(t, db, "init")
	w := startDashboard(t, db)
	if st, b := w.do(t, "GET", "/api/agents", "", "Authorization", ""); st != 401 || jget(t, b, "error.code") != "unauthorized" {
		t.Errorf("no token: %d %s", st, b)
	}
	if st, _ := w.do(t, "GET", "/", "", "Authorization", ""); st != 401 {
		t.Errorf("the page without a token: %d", st)
	}
	if st, _ := w.do(t, "GET", "/assets/app.js", "", "Authorization", ""); st != 401 {
		t.Errorf("an asset without a token: %d", st)
	}
	if st, _ := w.do(t, "GET", "/api/agents", "", "Authorization", "Bearer "+strings.Repeat("0", 64)); st != 401 {
		t.Errorf("a wrong token: %d", st)
	}
	if st, _ := w.do(t, "GET", "/api/agents", ""); st != 200 {
		t.Errorf("the token, no Origin (a script): %d", st)
	}
	port := strings.TrimPrefix(w.base, "http://127.0.0.1:")
	for _, o := range []string{"http://evil.example", "http://127.0.0.1:1", "null", "https://127.0.0.1:" + port} {
		if st, b := w.do(t, "POST", "/api/threads/thr_01aaaaaaaaaaaaaaaaaaaaaaaa/cancel", `{}`, "Origin", o); st != 403 || jget(t, b, "error.code") != "forbidden_origin" {
			t.Errorf("Origin %s: %d %s", o, st, b)
		}
	}
	for _, o := range []string{w.base, "http://localhost:" + port} {
		if st, _ := w.do(t, "GET", "/api/agents", "", "Origin", o, "Host", strings.TrimPrefix(o, "http://")); st != 200 {
			t.Errorf("own Origin %s: %d", o, st)
		}
	}
	for _, h := range []string{"evil.example", "evil.example:" + port, "127.0.0.1:1", "attacker.127.0.0.1.nip.io:" + port} {
		if st, b := w.do(t, "GET", "/api/agents", "", "Host", h); st != 403 || jget(t, b, "error.code") != "forbidden_host" {
			t.Errorf("Host %s: %d %s", h, st, b)
		}
	}
	// The printed launch URL, visited, is traded for a session: a cookie
	// with its id (HttpOnly, SameSite=Strict, for this browser's session
	// only), and its secret in the page, which is not stored.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	visit := func(u string, cookie string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	secretOf := regexp.MustCompile(`<meta name="inbox-session" content="([0-9a-f]{64})">`)
	resp, page := visit(w.url, "")
	c := resp.Cookies()
	m := secretOf.FindStringSubmatch(page)
	if resp.StatusCode != 200 || len(c) != 1 || c[0].Name != "inbox_web_"+port || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode ||
		c[0].Path != "/" || !c[0].Expires.IsZero() || c[0].MaxAge != 0 || m == nil || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the printed URL's visit: %d %v %v\n%.300s", resp.StatusCode, resp.Header, c, page)
	}
	cookie, secret := c[0].Name+"="+c[0].Value, m[1]
	if c[0].Value == w.token || secret == w.token || c[0].Value == secret || strings.Contains(page, w.token) {
		t.Errorf("the session gives away the token: cookie %s, secret %s", c[0].Value, secret)
	}
	// The printed URL served its visit.
	if resp, _ := visit(w.url, ""); resp.StatusCode != 401 {
		t.Errorf("the printed URL again: %d, want 401", resp.StatusCode)
	}
	// The cookie alone is the page's shell and assets, never the secret
	// again, and no API call.
	if resp, page := visit(w.base+"/", cookie); resp.StatusCode != 200 || !strings.Contains(page, "<html") || secretOf.MatchString(page) {
		t.Errorf("the page with the cookie: %d %.300s", resp.StatusCode, page)
	}
	if st, _ := w.do(t, "GET", "/assets/app.js", "", "Authorization", "", "Cookie", cookie); st != 200 {
		t.Errorf("an asset with the cookie: %d", st)
	}
	for _, path := range []string{"/api/agents", "/api/info", "/api/events"} {
		if st, b := w.do(t, "GET", path, "", "Authorization", "", "Cookie", cookie); st != 401 {
			t.Errorf("GET %s with the cookie alone: %d %s", path, st, b)
		}
		if st, b := w.do(t, "GET", path, "", "Authorization", "", sessionHeader, secret); st != 401 {
			t.Errorf("GET %s with the secret alone: %d %s", path, st, b)
		}
	}
	if st, b := w.do(t, "GET", "/api/agents", "", "Authorization", "", "Cookie", cookie, sessionHeader, secret); st != 200 {
		t.Errorf("with the cookie and the secret: %d %s", st, b)
	}
	// Another cookie of the same name beside it (a page of another port
	// may set one) does not lock the page out.
	if st, b := w.do(t, "GET", "/api/agents", "", "Authorization", "", "Cookie", "inbox_web_"+port+"=planted; "+cookie, sessionHeader, secret); st != 200 {
		t.Errorf("with a planted cookie beside the session's: %d %s", st, b)
	}
	// A second browser: POST /api/launch, with the token only.
	if st, b := w.do(t, "POST", "/api/launch", "", "Authorization", "", "Cookie", cookie, sessionHeader, secret); st != 401 {
		t.Errorf("POST /api/launch with a session: %d %s", st, b)
	}
	second := w.launch(t)
	resp, page = visit(second, "")
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 || !secretOf.MatchString(page) {
		t.Fatalf("a launch URL from POST /api/launch: %d %v", resp.StatusCode, resp.Cookies())
	}
	if other := secretOf.FindStringSubmatch(page)[1]; other == secret || resp.Cookies()[0].Value == c[0].Value {
		t.Errorf("a second browser got the first one's session")
	}
	if resp, _ := visit(second, ""); resp.StatusCode != 401 {
		t.Errorf("a launched URL again: %d, want 401", resp.StatusCode)
	}
	// A browser that has a session and visits a new launch URL goes on
	// with it: its other tabs keep working.
	resp, page = visit(w.launch(t), cookie)
	if m := secretOf.FindStringSubmatch(page); resp.StatusCode != 200 || m == nil || m[1] != secret {
		t.Errorf("a launch URL visited with a live session: %d, want the same session", resp.StatusCode)
	}
	// A URL made by hand with the bearer token is a launch URL that does
	// not die (the token is the script's credential anyway); on the API,
	// ?token= is nothing.
	for range 2 {
		if resp, page := visit(w.base+"/?token="+w.token, ""); resp.StatusCode != 200 || !secretOf.MatchString(page) {
			t.Errorf("the page with ?token=TOKEN: %d", resp.StatusCode)
		}
	}
	if st, b := w.do(t, "GET", "/api/agents?token="+w.token, "", "Authorization", ""); st != 401 {
		t.Errorf("GET /api/agents?token=TOKEN: %d %s", st, b)
	}
	// The token file is the store owner's alone, and goes at exit.
	if fi, err := osStat(w.tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file %s: %v %v", w.tokenFile, fi, err)
	}
	w.stop(t)
	if _, err := osStat(w.tokenFile); err == nil {
		t.Errorf("token file %s left behind", w.tokenFile)
	}
}

// sseEvent is one event of the stream.
type sseEvent struct {
	id   int64
	typ  string
	data string
}

// stream opens /api/events (after lastID, when > 0) and sends its events
// on the channel until the response ends.
func (w *dashboard) stream(t *testing.T, lastID int64) (<-chan sseEvent, func()) {
	t.Helper()
	req, _ := http.NewRequest("GET", w.base+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET /api/events: %d %v", resp.StatusCode, resp.Header)
	}
	ch := make(chan sseEvent, 1000)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			case line == "" && ev.data != "":
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return ch, func() { resp.Body.Close() }
}

// next waits for the stream's next event of the log (a presence change,
// which a new server reports once it follows presence, is skipped).
func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	for {
		if ev := nextAny(t, ch); ev.typ != "presence" {
			return ev
		}
	}
}

// nextAny waits for the stream's next event, whatever its type.
func nextAny(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20 s")
	}
	return sseEvent{}
}

// TestEventStreamResumes pushes what the CLI does to an open stream, then
// resumes with Last-Event-ID across a restart of the server: every event
// the log holds after it, in order, none twice, none missing, exactly as
// inbox events lists them.
func TestEventStreamResumes(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		w := startDashboard(t, db)
		ch, closeStream := w.stream(t, 0)
		// The stream is open once the server has sent its first line; a
		// send now is after its start.
		tid := jget(t, run(t, db, "send", "--from", "lead", "--to", "w1", "--subject", "live one"), "thread.thread_id")
		first := next(t, ch)
		if jget(t, []byte(first.data), "thread_id") != tid || jget(t, []byte(first.data), "event_type") != "thread_created" ||
			jget(t, []byte(first.data), "event_id") != strconv.FormatInt(first.id, 10) {
			t.Fatalf("first pushed event: id %d %s", first.id, first.data)
		}
		run(t, db, "claim", "--agent", "w1", "--thread", tid)
		seen := next(t, ch)
		closeStream()
		w.stop(t)
		// While no server runs, the store goes on.
		run(t, db, "update", "--agent", "w1", "--thread", tid, "--status", "in_progress", "--summary", "half")
		run(t, db, "send", "--from", "lead", "--to", "w2", "--subject", "another")
		run(t, db, "done", "--agent", "w1", "--thread", tid, "--summary", "all")
		w2 := startDashboard(t, db)
		ch2, closeStream2 := w2.stream(t, seen.id)
		defer closeStream2()
		want := run(t, db, "events", "--after-event", strconv.FormatInt(seen.id, 10))
		var evs struct {
			Events []json.RawMessage `json:"events"`
		}
		json.Unmarshal(want, &evs)
		if len(evs.Events) != 3 {
			t.Fatalf("events after %d: %s", seen.id, want)
		}
		for i, e := range evs.Events {
			got := next(t, ch2)
			sameJSON(t, fmt.Sprintf("resumed event %d", i), []byte(got.data), e)
			if jget(t, e, "event_id") != strconv.FormatInt(got.id, 10) {
				t.Errorf("resumed event %d: id: %d, want %s", i, got.id, jget(t, e, "event_id"))
			}
		}
		// Then it goes on live, with nothing repeated.
		run(t, db, "send", "--from", "lead", "--to", "w3", "--subject", "after the resume")
		live := next(t, ch2)
		if jget(t, []byte(live.data), "event_type") != "thread_created" || live.id <= seen.id {
			t.Errorf("live after the resume: %d %s", live.id, live.data)
		}
	})
}

var osStat = os.Stat

// TestAddrInUse: a port given with --addr that is taken is a conflict
// (20) naming the flag; the default port, when taken, gives way to a free
// one, said on stderr.
func TestAddrInUse(t *testing.T) {
	db := filepath.Join(t.TempDir(), "store")
	run(t, db, "init")
	w := startDashboard(t, db)
	addr := strings.TrimPrefix(w.base, "http://")
	out, code := runCode(t, db, "web", "--addr", addr)
	if code != 20 || jget(t, out, "error.code") != "address_in_use" || jget(t, out, "error.field") != "addr" {
		t.Errorf("a second server on %s: exit %d %s", addr, code, out)
	}
	// Take the default port (if something else holds it, it is taken
	// all the same).
	if ln, err := net.Listen("tcp", "127.0.0.1:7878"); err == nil {
		defer ln.Close()
	}
	cmd := exec.Command("inbox", "web", "--db", db, "--json")
	stderr, _ := cmd.StderrPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	// It says so on stderr before it listens, then prints its address.
	errs := bufio.NewScanner(stderr)
	if !errs.Scan() || !strings.Contains(errs.Text(), "127.0.0.1:7878 is in use, taking a free port") {
		t.Errorf("stderr does not say the default port was taken: %q", errs.Text())
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatal("inbox web with the default port taken printed nothing")
	}
	if u := jget(t, sc.Bytes(), "url"); !strings.HasPrefix(u, "http://127.0.0.1:") || strings.HasPrefix(u, "http://127.0.0.1:7878/") {
		t.Errorf("with 7878 taken the server is at %s", u)
	}
}

// TestAttentionAndWaits: a blocked question needs attention until an
// answer lands (while the thread is still blocked); two workers blocked
// on each other's questions are a cycle of the wait graph.
func TestAttentionAndWaits(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		// w2 asks w1 for one thing, w1 asks w2 for another; each blocks
		// on a question to the other.
		a := jget(t, run(t, db, "send", "--from", "w2", "--to", "w1", "--subject", "a for w2"), "thread.thread_id")
		b := jget(t, run(t, db, "send", "--from", "w1", "--to", "w2", "--subject", "b for w1"), "thread.thread_id")
		run(t, db, "claim", "--agent", "w1", "--thread", a)
		run(t, db, "update", "--agent", "w1", "--thread", a, "--status", "blocked", "--summary", "need b first")
		run(t, db, "claim", "--agent", "w2", "--thread", b)
		run(t, db, "update", "--agent", "w2", "--thread", b, "--status", "blocked", "--summary", "need a first")
		w := startDashboard(t, db)
		st, got := w.do(t, "GET", "/api/waits", "")
		if st != 200 || jget(t, got, "command") != "waits" || jget(t, got, "cycles") != `[["w1","w2"]]` {
			t.Fatalf("waits: %d %s", st, got)
		}
		if jget(t, got, "edges.0.reason") != "blocked" {
			t.Errorf("waits' edges: %s", got)
		}
		st, got = w.do(t, "GET", "/api/attention", "")
		if st != 200 || jget(t, got, "command") != "attention" || jget(t, got, "counts.blocked") != "2" {
			t.Fatalf("attention: %d %s", st, got)
		}
		// An answer takes the question off the list before the worker
		// resumes, and breaks the cycle.
		if st, got := w.do(t, "POST", "/api/threads/"+a+"/answer", `{"from":"w2","summary":"go ahead"}`); st != 200 {
			t.Fatalf("answer: %d %s", st, got)
		}
		_, got = w.do(t, "GET", "/api/attention", "")
		if jget(t, got, "counts.blocked") != "1" || jget(t, got, "items.0.thread_id") != b || jget(t, got, "items.0.summary") != "need a first" {
			t.Errorf("attention after the answer: %s", got)
		}
		if _, got = w.do(t, "GET", "/api/waits", ""); jget(t, got, "cycles") != "[]" {
			t.Errorf("waits after the answer: %s", got)
		}
		if st, got := w.do(t, "GET", "/api/waits?colour=red", ""); st != 400 {
			t.Errorf("waits with an unknown parameter: %d %s", st, got)
		}
	})
}

// TestPresencePushed: a wait starting or ending is in no event of the log,
// yet the open pages are told (an SSE event of type presence) and the
// agents and the wait graph show it at once.
func TestPresencePushed(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		// The leader waits for w1's reply (a worker holding a lease would
		// show as working, whatever it waits for).
		tid := jget(t, run(t, db, "send", "--from", "lead", "--to", "w1", "--subject", "wait here"), "thread.thread_id")
		w := startDashboard(t, db)
		ch, closeStream := w.stream(t, 0)
		defer closeStream()
		nextPresence := func() {
			t.Helper()
			for {
				if ev := nextAny(t, ch); ev.typ == "presence" {
					return
				}
			}
		}
		wait := exec.Command("inbox", "wait-reply", "--db", db, "--agent", "lead", "--thread", tid, "--timeout-seconds", "60", "--json")
		if err := wait.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { wait.Process.Kill(); wait.Wait() }()
		// The presence events come as the wait registers, and after the
		// one that follows a change both views show it (a presence event
		// still queued from before can come first: look again at the next).
		shows := func(waiting bool) bool {
			_, agents := w.do(t, "GET", "/api/agents", "")
			_, waits := w.do(t, "GET", "/api/waits", "")
			return strings.Contains(string(agents), `"agent":"lead","state":"waiting"`) == waiting &&
				strings.Contains(string(waits), `"reason":"wait_reply"`) == waiting
		}
		for {
			nextPresence()
			if shows(true) {
				break
			}
		}
		wait.Process.Kill()
		wait.Wait()
		for {
			nextPresence()
			if shows(false) {
				break
			}
		}
	})
}
