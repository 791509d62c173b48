package webserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// The other web server of the cookie-leak test: a page another local
// user serves on another port of 127.0.0.1, which the dashboard's user
// visits. Cookies are scoped by host, not by port, so the browser sends
// it whatever cookies it holds for 127.0.0.1 with the page's own
// sub-requests; it records every request it receives.

// otherRequest is one request the other server received.
type otherRequest struct {
	Method string      `json:"method"`
	URI    string      `json:"uri"`
	Header http.Header `json:"header"`
}

// otherPage loads an image and fetches from its own server, with and
// without credentials, then sets window.__other to true.
const otherPage = `<!doctype html><title>elsewhere</title>
<img id="px" src="/pixel.gif?via=img">
<script>
window.__other = (async () => {
  const img = document.getElementById("px");
  await new Promise((resolve) => { if (img.complete) resolve(); else { img.onload = resolve; img.onerror = resolve; } });
  await fetch("/probe?via=fetch-include", {credentials: "include"}).catch(() => {});
  await fetch("/probe?via=fetch").catch(() => {});
  return true;
})();
</script>`

// otherHandler records each request (but GET /record, which answers
// what it recorded) and serves otherPage at / and a pixel elsewhere.
func otherHandler() http.Handler {
	var mu sync.Mutex
	var got []otherRequest
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/record" {
			mu.Lock()
			b, _ := json.Marshal(got)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
			return
		}
		mu.Lock()
		got = append(got, otherRequest{r.Method, r.RequestURI, r.Header.Clone()})
		mu.Unlock()
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, otherPage)
			return
		}
		w.Header().Set("Content-Type", "image/gif")
		w.Write([]byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"))
	})
}

// otherServerMain is other-server: otherHandler on a free loopback port,
// which it prints on its first line.
func otherServerMain() {
	srv := httptest.NewUnstartedServer(otherHandler())
	srv.Start()
	fmt.Println(srv.URL)
	select {}
}

// startOtherServer starts the other server: as uid 65534 (another local
// user) when the test runs as root, else in this process.
func startOtherServer(t *testing.T) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Logf("not root: the other server runs in the test's own process, as uid %d, not as another user", os.Getuid())
		srv := httptest.NewServer(otherHandler())
		t.Cleanup(srv.Close)
		return srv.URL
	}
	// A directory every user may enter, for a copy of the binary.
	open, err := os.MkdirTemp("", "other-server-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(testproc.Installed(t, "other-server"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(open, "other-server")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + open}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	testproc.Start(t, cmd)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Scan()
		line <- sc.Text()
		io.Copy(io.Discard, out)
	}()
	select {
	case u := <-line:
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Fatalf("the other server (uid 65534) printed %q, not its URL; stderr:\n%s", u, stderr.String())
		}
		t.Logf("the other server runs as uid 65534 at %s", u)
		return u
	case <-time.After(30 * time.Second):
		t.Fatalf("the other server (uid 65534) printed no URL within 30 s; stderr:\n%s", stderr.String())
	}
	return ""
}

// otherRecord is what the other server received so far.
func otherRecord(t *testing.T, base string) []otherRequest {
	t.Helper()
	resp, err := http.Get(base + "/record")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []otherRequest
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// leakedValues is every value the other server was handed: each Cookie
// header whole, each cookie's value, each query parameter's value and
// each query whole.
func leakedValues(got []otherRequest) (cookieHeaders, values []string) {
	add := func(list []string, v string) []string {
		if v == "" || slices.Contains(list, v) {
			return list
		}
		return append(list, v)
	}
	for _, r := range got {
		for _, c := range r.Header.Values("Cookie") {
			cookieHeaders = add(cookieHeaders, c)
			for _, part := range strings.Split(c, ";") {
				if _, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok {
					values = add(values, v)
				}
			}
		}
		if u, err := url.Parse(r.URI); err == nil {
			values = add(values, u.RawQuery)
			for _, vs := range u.Query() {
				for _, v := range vs {
					values = add(values, v)
				}
			}
		}
	}
	return cookieHeaders, values
}

// dashboardEndpoints is every endpoint of the API, and the page.
func dashboardEndpoints(thread string) []struct{ method, path, body, accept string } {
	return []struct{ method, path, body, accept string }{
		{"GET", "/api/info", "", ""},
		{"GET", "/api/agents", "", ""},
		{"GET", "/api/threads", "", ""},
		{"GET", "/api/threads/" + thread, "", ""},
		{"GET", "/api/threads/" + thread + "/events", "", ""},
		{"GET", "/api/queue", "", ""},
		{"GET", "/api/teams", "", ""},
		{"GET", "/api/search?q=database", "", ""},
		{"GET", "/api/attention", "", ""},
		{"GET", "/api/waits", "", ""},
		{"GET", "/api/events", "", ""},
		{"GET", "/api/events", "", "text/event-stream"},
		{"GET", "/api/blobs/" + strings.Repeat("ab", 32), "", ""},
		{"POST", "/api/threads/" + thread + "/answer", `{"from":"lead","summary":"forged"}`, ""},
		{"POST", "/api/threads/" + thread + "/cancel", `{"agent":"lead","reason":"forged"}`, ""},
		{"POST", "/api/launch", "", ""},
	}
}

// replayStatus sends one request to the dashboard and returns its
// status (a redirect's own); the response is not read past its header
// (a stream would not end).
func replayStatus(t *testing.T, d *dashboard, method, path, body, accept string, hdr http.Header) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// noRedirects is a client that returns a redirect as it is.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// withQuery is path with token=v added to its query.
func withQuery(path, v string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "token=" + url.QueryEscape(v)
}

// testNothingLeaks: a page another local user serves on another port of
// 127.0.0.1, visited by the dashboard's user in the same browser, gets
// nothing that opens the dashboard: whatever it received (cookies,
// queries), replayed against every endpoint of the API and the stream in
// every way a credential can be sent, is refused with 401. The URL the
// dashboard printed opens it once; opened again it is 401. The
// dashboard's own tab still works: pushed updates and the answer.
func testNothingLeaks(t *testing.T, browser context.Context) {
	db := newStore(t)
	blocked := threadOf(t, inboxCLI(t, db, "send", "--from", "lead", "--to", "w1", "--subject", "migrate the schema"))
	inboxCLI(t, db, "claim", "--agent", "w1", "--thread", blocked)
	inboxCLI(t, db, "update", "--agent", "w1", "--thread", blocked, "--status", "blocked", "--summary", "which database?")
	d := startDashboard(t, db)
	p := openTab(t, browser)
	p.do("open the printed URL", chromedp.Navigate(d.url+"#/threads"))
	p.waitFor(`[data-view="threads"] [data-thread-id="` + blocked + `"]`)
	p.waitFor(`#live[data-state="live"]`)

	other := startOtherServer(t)
	q := p.sibling(t)
	q.do("visit the other server's page", chromedp.Navigate(other+"/"))
	if !eval[bool](q, "window.__other") {
		q.fatalf("the other page's script did not finish")
	}
	got := otherRecord(t, other)
	var uris []string
	for _, r := range got {
		uris = append(uris, r.URI)
	}
	for _, via := range []string{"/pixel.gif?via=img", "/probe?via=fetch-include", "/probe?via=fetch"} {
		if !slices.Contains(uris, via) {
			t.Fatalf("the other server did not receive %s (it received %q): the test shows nothing", via, uris)
		}
	}
	cookies, values := leakedValues(got)
	t.Logf("the other server received %d requests, Cookie headers %q", len(got), cookies)

	port := strings.TrimPrefix(d.base, "http://127.0.0.1:")
	cookieName := "inbox_web_" + port
	var forms []http.Header
	var queries []string
	for _, c := range cookies {
		forms = append(forms, http.Header{"Cookie": {c}})
		for _, v := range values {
			forms = append(forms, http.Header{"Cookie": {c}, "X-Inbox-Session": {v}})
		}
	}
	for _, v := range values {
		forms = append(forms,
			http.Header{"Cookie": {cookieName + "=" + v}},
			http.Header{"Authorization": {"Bearer " + v}},
			http.Header{"X-Inbox-Session": {v}})
		queries = append(queries, v)
	}
	replays, open := 0, 0
	// opened says that a replay was not refused: the first of each
	// endpoint in full, the others counted.
	opened := func(what string, st int, first bool) {
		open++
		if first {
			t.Errorf("%s, as the other server received it: status %d, want 401", what, st)
		}
	}
	for _, e := range dashboardEndpoints(blocked) {
		before := open
		for _, h := range forms {
			if st := replayStatus(t, d, e.method, e.path, e.body, e.accept, h); st != http.StatusUnauthorized {
				opened(fmt.Sprintf("%s %s (Accept %q) with %v", e.method, e.path, e.accept, h), st, open == before)
			}
			replays++
		}
		for _, v := range queries {
			if st := replayStatus(t, d, e.method, withQuery(e.path, v), e.body, e.accept, nil); st != http.StatusUnauthorized {
				opened(fmt.Sprintf("%s %s (Accept %q) with ?token=%s", e.method, e.path, e.accept, v), st, open == before)
			}
			replays++
		}
	}
	// Nor is any of it a launch token for a session of its own.
	for _, v := range values {
		if st := replayStatus(t, d, "GET", withQuery("/", v), "", "", nil); st != http.StatusUnauthorized {
			opened("GET /?token="+v, st, true)
		}
		replays++
	}
	if open > 0 {
		t.Errorf("%d of %d replays of what the other server received opened the dashboard", open, replays)
	} else {
		t.Logf("%d replays of what the other server received, each refused with 401", replays)
	}
	show := inboxCLI(t, db, "show", "--thread", blocked)
	if b, _ := json.Marshal(show); strings.Contains(string(b), "forged") {
		t.Errorf("a replay changed the thread: %s", b)
	}

	// The printed URL served its one visit.
	if st := replayStatus(t, d, "GET", strings.TrimPrefix(d.url, d.base), "", "", nil); st != http.StatusUnauthorized {
		t.Errorf("the printed URL fetched again: status %d, want 401", st)
	}
	second := openTab(t, browser)
	ctx, cancel := context.WithTimeout(second.ctx, pageTimeout)
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(d.url))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusUnauthorized {
		t.Errorf("the printed URL opened again in another browser: status %d, want 401", resp.Status)
	}

	// The dashboard's own tab goes on: a send shows up, pushed, and an
	// answer from the page lands.
	fresh := threadOf(t, inboxCLI(t, db, "send", "--from", "lead", "--to", "w2", "--subject", "after the visit"))
	p.waitFor(`[data-view="threads"] [data-thread-id="` + fresh + `"]`)
	p.show("#/attention", "attention")
	item := `[data-view="attention"] [data-kind="blocked"]`
	p.waitFor(item + ` [name="summary"]`)
	p.do("answer from the page",
		chromedp.SendKeys(chromedp.CSS(item+` [name="summary"]`), "postgres 16"),
		chromedp.Click(chromedp.CSS(item+` [data-action="answer"]`)))
	wait[bool](p, "the answered question to leave the list", `!document.querySelector(`+jsString(item)+`)`)
	show = inboxCLI(t, db, "show", "--thread", blocked)
	if b, _ := json.Marshal(show); !strings.Contains(string(b), "postgres 16") {
		t.Errorf("the page's answer is not in the thread: %s", b)
	}
}
