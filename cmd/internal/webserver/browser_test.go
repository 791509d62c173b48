package webserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// TestBrowser drives the dashboard in a real browser (Debian's chromium,
// installed when missing) against stores made with the CLI and inbox web
// started as a process, as a person runs them. One browser serves every
// subtest; each subtest opens its own tab in a browser context of its
// own (its own cookies).
func TestBrowser(t *testing.T) {
	browser := newBrowser(t)

	t.Run("agents and threads", func(t *testing.T) {
		db := newStore(t)
		t1 := threadOf(t, inboxCLI(t, db, "send", "--from", "lead", "--to", "w1", "--subject", "migrate the schema", "--body", "postgres please"))
		t2 := threadOf(t, inboxCLI(t, db, "send", "--from", "lead", "--to", "w2", "--subject", "write the docs"))
		inboxCLI(t, db, "claim", "--agent", "w1", "--thread", t1)
		d := startDashboard(t, db)
		p := openTab(t, browser)
		p.do("open the printed URL", chromedp.Navigate(d.url))
		// The launch token was traded for a session and the address
		// cleaned of it.
		p.waitFor(`[data-view="agents"] [data-agent="w1"]`)
		p.waitFor(`[data-view="agents"] [data-agent="w2"]`)
		if loc := eval[string](p, "location.href"); strings.Contains(loc, "token") {
			t.Errorf("the address still carries the token: %s", loc)
		}
		p.show("#/threads", "threads")
		p.waitFor(`[data-view="threads"] [data-thread-id="` + t1 + `"]`)
		p.waitFor(`[data-view="threads"] [data-thread-id="` + t2 + `"]`)
		p.show("#/thread/"+t1, "thread")
		wait[bool](p, "the transcript", `document.querySelector('[data-view="thread"]').innerText.includes("postgres please")`)
	})

	t.Run("send appears without a reload", func(t *testing.T) {
		db, p := threadsBoard(t, browser)
		shown, pushed := sendToPage(t, p, db, 50)
		if got := eval[string](p, "window.__noReload"); got != "still here" {
			t.Fatalf("the page was reloaded (its window variable is %q)", got)
		}
		t.Logf("CLI send exit → its thread on the open page, %d sends: p50 %.1f ms, p99 %.1f ms, max %.1f ms (the issue's target: p50 ≤ 100, p99 ≤ 500)",
			len(shown), percentile(shown, 50), percentile(shown, 99), slices.Max(shown))
		if len(pushed) > 0 {
			t.Logf("of which the server's push (send exit → its event in the page): p50 %.1f ms, p99 %.1f ms", percentile(pushed, 50), percentile(pushed, 99))
		}
	})

	t.Run("answer wakes wait-reply", func(t *testing.T) {
		db := newStore(t)
		tid := threadOf(t, inboxCLI(t, db, "send", "--from", "lead", "--to", "w1", "--subject", "migrate the schema"))
		inboxCLI(t, db, "claim", "--agent", "w1", "--thread", tid)
		inboxCLI(t, db, "update", "--agent", "w1", "--thread", tid, "--status", "blocked", "--summary", "which database?")
		d := startDashboard(t, db)

		// The worker waits for its answer before anyone gives it.
		waiter := exec.Command(testproc.Installed(t, "inbox"), "wait-reply", "--db", db, "--agent", "w1", "--thread", tid,
			"--timeout-seconds", "120", "--json")
		var out, errOut lockedBuffer
		waiter.Stdout, waiter.Stderr = &out, &errOut
		testproc.Start(t, waiter)
		woke := make(chan error, 1)
		go func() { woke <- waiter.Wait() }()

		p := openTab(t, browser)
		p.do("open the attention view", chromedp.Navigate(d.url+"#/attention"))
		item := `[data-view="attention"] [data-kind="blocked"]`
		p.waitFor(item + ` [name="summary"]`)
		if !strings.Contains(eval[string](p, "document.querySelector("+jsString(item)+").innerText"), "which database?") {
			p.fatalf("the blocked item does not show its question")
		}
		select {
		case err := <-woke:
			t.Fatalf("wait-reply ended before the answer: %v\n%s%s", err, out.String(), errOut.String())
		default:
		}
		p.do("answer from the page",
			chromedp.SendKeys(chromedp.CSS(item+` [name="summary"]`), "postgres 16"),
			chromedp.Click(chromedp.CSS(item+` [data-action="answer"]`)))
		select {
		case err := <-woke:
			if err != nil || !strings.Contains(out.String(), `"woke":true`) {
				t.Fatalf("wait-reply after the page's answer: %v\n%s%s", err, out.String(), errOut.String())
			}
		case <-time.After(pageTimeout):
			p.fatalf("wait-reply did not wake within %v of the page's answer", pageTimeout)
		}
		if !strings.Contains(out.String(), "postgres 16") {
			t.Errorf("wait-reply woke with another message: %s", out.String())
		}
		// The question leaves the list as soon as it is answered, pushed.
		wait[bool](p, "the answered question to leave the list", `!document.querySelector(`+jsString(item)+`)`)
	})

	t.Run("deadlock flagged", func(t *testing.T) {
		db := newStore(t)
		// w1 works on a thread w2 created, w2 on one w1 created; each
		// blocks on a question only the other can answer.
		a := threadOf(t, inboxCLI(t, db, "send", "--from", "w2", "--to", "w1", "--subject", "build the API"))
		b := threadOf(t, inboxCLI(t, db, "send", "--from", "w1", "--to", "w2", "--subject", "write the client"))
		inboxCLI(t, db, "claim", "--agent", "w1", "--thread", a)
		inboxCLI(t, db, "claim", "--agent", "w2", "--thread", b)
		inboxCLI(t, db, "update", "--agent", "w1", "--thread", a, "--status", "blocked", "--summary", "what does the client send?")
		inboxCLI(t, db, "update", "--agent", "w2", "--thread", b, "--status", "blocked", "--summary", "what does the API return?")
		d := startDashboard(t, db)
		p := openTab(t, browser)
		p.do("open the waits view", chromedp.Navigate(d.url+"#/waits"))
		p.waitFor(`[data-view="waits"] [data-cycle]`)
		cycles := eval[[]string](p, `[...document.querySelectorAll('[data-view="waits"] [data-cycle]')].map(e => e.getAttribute("data-cycle") + " " + e.textContent)`)
		w1, w2 := regexp.MustCompile(`\bw1\b`), regexp.MustCompile(`\bw2\b`)
		found := false
		for _, c := range cycles {
			found = found || w1.MatchString(c) && w2.MatchString(c)
		}
		if !found {
			p.fatalf("no deadlock cycle names both w1 and w2: %q", cycles)
		}
	})

	t.Run("blob downloads", func(t *testing.T) {
		// A link cannot send the session's secret: the page fetches the
		// blob with it and hands it to the browser.
		db := newStore(t)
		content := strings.Repeat("the whole output\n", 1000)
		file := filepath.Join(t.TempDir(), "out.txt")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		tid := threadOf(t, inboxCLI(t, db, "send", "--from", "lead", "--to", "w1", "--subject", "a big one", "--body-file", file, "--blob"))
		d := startDashboard(t, db)
		p := openTab(t, browser)
		p.do("open the thread", chromedp.Navigate(d.url+"#/thread/"+tid))
		link := `[data-view="thread"] a.download[href^="/api/blobs/"]`
		p.waitFor(link)
		p.do("download the blob", chromedp.Click(chromedp.CSS(link)))
		if got := wait[string](p, "the download", `document.querySelector(`+jsString(link)+`).dataset.downloaded`); got != strconv.Itoa(len(content)) {
			p.fatalf("the page downloaded %s bytes of the blob, want %d", got, len(content))
		}
	})

	t.Run("nothing that opens the dashboard reaches another port", func(t *testing.T) {
		testNothingLeaks(t, browser)
	})

	// The views below read one realistic store, through one server.
	t.Run("team store", func(t *testing.T) {
		s := newRichStore(t)
		s.d = startDashboard(t, s.db)
		browseTeamStore(t, browser, s)
	})
}

// browseTeamStore runs the subtests that only read the team store s.
func browseTeamStore(t *testing.T, browser context.Context, s *richStore) {
	t.Run("no request leaves the origin", func(t *testing.T) {
		p := openTab(t, browser)
		p.do("open the printed URL", chromedp.Navigate(s.d.launch(t)))
		p.waitFor(`[data-view="agents"] [data-agent="` + s.lead + `"]`)
		views := []struct{ route, view, ready string }{
			{"#/agents", "agents", `[data-agent]`},
			{"#/attention", "attention", `[data-kind]`},
			{"#/waits", "waits", `[data-cycle]`},
			{"#/threads", "threads", `[data-thread-id]`},
			{"#/thread/" + s.blocked, "thread", ``},
			{"#/queue", "queue", ``},
			{"#/teams", "teams", ``},
			{"#/events", "events", ``},
			{"#/search?q=schema", "search", ``},
		}
		for _, v := range views {
			p.show(v.route, v.view)
			root := `[data-view="` + v.view + `"]`
			if v.ready != "" {
				p.waitFor(root + " " + v.ready)
			}
			// A view has shown its data once its loading note is gone.
			wait[bool](p, v.view+" loaded", `(r => r && r.innerText.trim() !== "" && !r.querySelector(".loading"))(document.querySelector(`+jsString(root)+`))`)
		}
		// The browser's own record of what the page fetched agrees.
		resources := eval[[]string](p, `performance.getEntriesByType("resource").map(e => e.name)`)
		urls := append(p.requested(), resources...)
		if len(urls) < 5 {
			t.Fatalf("only %d requests seen over every view: %q", len(urls), urls)
		}
		var foreign []string
		for _, u := range urls {
			pu, err := url.Parse(u)
			if err != nil {
				foreign = append(foreign, u)
				continue
			}
			if pu.Scheme == "data" || pu.Scheme == "about" || pu.Scheme == "blob" {
				continue
			}
			if pu.Scheme+"://"+pu.Host != s.d.base {
				foreign = append(foreign, u)
			}
		}
		if len(foreign) > 0 {
			t.Errorf("requests outside %s: %q", s.d.base, foreign)
		}
		if v := eval[[]string](p, "window.__cspViolations || []"); len(v) > 0 {
			t.Errorf("the page tried to load what its policy refuses: %q", v)
		}
	})

	t.Run("nothing without the token", func(t *testing.T) {
		p := openTab(t, browser)
		ctx, cancel := context.WithTimeout(p.ctx, pageTimeout)
		defer cancel()
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(s.d.base+"/"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusUnauthorized {
			t.Errorf("GET / without the token: status %d, want 401", resp.Status)
		}
		if eval[bool](p, `!!document.querySelector("[data-view], #main, script")`) {
			p.fatalf("the page was served without the token")
		}
		for _, path := range []string{"/api/agents", "/api/threads", "/api/info", "/assets/app.js", "/api/events"} {
			if got := eval[int](p, `fetch(`+jsString(path)+`).then(r => r.status)`); got != http.StatusUnauthorized {
				t.Errorf("GET %s without the token: status %d, want 401", path, got)
			}
		}
	})

	t.Run("evil origin refused", func(t *testing.T) {
		// A plain request with the token and a foreign Origin.
		if code, body := s.d.get(t, "/api/agents", "Origin", "http://evil.example"); code != http.StatusForbidden {
			t.Errorf("GET /api/agents with Origin http://evil.example: status %d, want 403\n%s", code, body)
		}
		// A page of another local origin, in a browser that holds the
		// dashboard's cookie (the same site: ports do not make sites),
		// reads and posts with credentials.
		p := openTab(t, browser)
		p.do("open the printed URL", chromedp.Navigate(s.d.launch(t)))
		p.waitFor(`[data-view="agents"] [data-agent]`)
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, evilPage)
		}))
		t.Cleanup(evil.Close)
		p.forget()
		p.do("open the other origin's page", chromedp.Navigate(evil.URL+"/"))
		wait[bool](p, "the other origin's script", `!!window.__evil`)
		results := eval[map[string]string](p, `window.__evil.run(`+jsString(s.d.base)+`, `+jsString(s.blocked)+`)`)
		if r := results["read"]; !strings.HasPrefix(r, "error") {
			t.Errorf("the other origin read the API: %s", r)
		}
		// The server itself refused them (not only the browser's CORS
		// check): 403 for each, and nothing changed in the store.
		for _, path := range []string{"/api/agents", "/api/threads/" + s.blocked + "/answer", "/api/threads/" + s.blocked + "/cancel"} {
			// The browser reports a response over DevTools after the
			// page's promise settles: wait for the report.
			got := p.awaitStatuses(s.d.base+path, 10*time.Second)
			if len(got) == 0 || slices.ContainsFunc(got, func(c int64) bool { return c != http.StatusForbidden }) {
				t.Errorf("%s from another origin: statuses %v, want 403 (what the page saw: %v)", path, got, results)
			}
		}
		show := inboxCLI(t, s.db, "show", "--thread", s.blocked)
		b, _ := json.Marshal(show)
		if th, _ := show["thread"].(map[string]any); th["status"] != "blocked" || bytes.Contains(b, []byte("from evil")) {
			t.Errorf("the other origin changed the thread: %s", b)
		}
	})

	t.Run("phone viewport", func(t *testing.T) {
		p := openTab(t, browser)
		p.do("open the printed URL on a phone",
			chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch),
			chromedp.Navigate(s.d.launch(t)))
		p.waitFor(`[data-view="agents"] [data-agent="` + s.lead + `"]`)
		wait[bool](p, "agents loaded", `!document.querySelector('[data-view="agents"] .loading')`)
		w := eval[[]int](p, `[document.documentElement.scrollWidth, document.body.scrollWidth, document.documentElement.clientWidth]`)
		if w[0] > w[2] || w[1] > w[2] {
			p.fatalf("the agents view overflows a 390 px wide phone: scroll widths %d (html), %d (body) against %d", w[0], w[1], w[2])
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		p := openTab(t, browser)
		p.do("open the printed URL", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(s.d.launch(t)))
		p.waitFor(`[data-view="agents"] [data-agent="` + s.lead + `"]`)
		p.waitFor(`#live[data-state="live"]`)
		wait[bool](p, "agents loaded", `!document.querySelector('[data-view="agents"] .loading')`)
		shot := screenshot(t, p)
		cfg, err := png.DecodeConfig(bytes.NewReader(shot))
		if err != nil || cfg.Width != 1280 || cfg.Height != 800 {
			t.Fatalf("screenshot: %dx%d, %v; want a 1280x800 PNG", cfg.Width, cfg.Height, err)
		}
		if dst := os.Getenv("INBOX_SCREENSHOT"); dst != "" {
			if err := os.WriteFile(dst, shot, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", dst)
		}
	})
}

// evilPage is a page of another origin that, once told the dashboard's
// origin, reads its API and posts its two actions with the browser's
// credentials (the posts as "simple" requests, which no preflight stops).
const evilPage = `<!doctype html><title>elsewhere</title><script>
window.__evil = {run: async (base, thread) => {
  const out = {};
  const attempt = async (name, path, init) => {
    try {
      const r = await fetch(base + path, {credentials: "include", ...init});
      out[name] = "status " + r.status + " " + r.type;
    } catch (e) {
      out[name] = "error " + e.name;
    }
  };
  const post = (body) => ({method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: JSON.stringify(body)});
  await attempt("read", "/api/agents", {});
  await attempt("answer", "/api/threads/" + thread + "/answer", post({from: "mallory", summary: "from evil"}));
  await attempt("cancel", "/api/threads/" + thread + "/cancel", post({agent: "mallory", reason: "from evil"}));
  return out;
}};
</script>`

// threadsBoard is a new store holding one thread and a tab showing it on
// the threads board of the store's dashboard.
func threadsBoard(tb testing.TB, browser context.Context) (db string, p *tab) {
	tb.Helper()
	db = newStore(tb)
	first := threadOf(tb, inboxCLI(tb, db, "send", "--from", "lead", "--to", "w1", "--subject", "first"))
	d := startDashboard(tb, db)
	p = openTab(tb, browser)
	p.do("open the threads board", chromedp.Navigate(d.url+"#/threads"))
	p.waitFor(`[data-view="threads"] [data-thread-id="` + first + `"]`)
	return db, p
}

// sendToPage sends n new threads with the CLI while p shows the threads
// board, and returns for each the time from the send process's exit to
// its thread's element in the page, in milliseconds, and to the thread's
// event reaching the page over a stream of its own (what the server's
// push costs, before the page fetches and renders). The page records
// when each thread id first shows (a MutationObserver, on the wall clock
// both sides read); the window variable it sets first must survive: the
// page is never reloaded.
func sendToPage(tb testing.TB, p *tab, db string, n int) (shown, pushed []float64) {
	tb.Helper()
	wait[bool](p, "the probe's own event stream", `(() => {
  window.__noReload = "still here";
  window.__seen = {};
  window.__pushed = {};
  const mark = () => {
    const now = performance.timeOrigin + performance.now();
    for (const el of document.querySelectorAll('[data-view="threads"] [data-thread-id]')) {
      const id = el.getAttribute("data-thread-id");
      if (!(id in window.__seen)) window.__seen[id] = now;
    }
  };
  mark();
  new MutationObserver(mark).observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ["data-thread-id"]});
  // The stream as the page reads it: a fetch with the session's secret.
  return fetch("/api/events", {headers: {Accept: "text/event-stream", "X-Inbox-Session": localStorage.getItem("inbox.session")}}).then((res) => {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    (async () => {
      for (;;) {
        const {value, done} = await reader.read();
        if (done) return;
        const now = performance.timeOrigin + performance.now();
        buf += decoder.decode(value, {stream: true});
        const lines = buf.split("\n");
        buf = lines.pop();
        for (const line of lines) {
          if (!line.startsWith("data: ")) continue;
          try {
            const ev = JSON.parse(line.slice(6));
            if (ev.thread_id && !(ev.thread_id in window.__pushed)) window.__pushed[ev.thread_id] = now;
          } catch {}
        }
      }
    })();
    return res.ok;
  });
})()`)
	inbox := testproc.Installed(tb, "inbox")
	for i := range n {
		cmd := exec.Command(inbox, "send", "--db", db, "--json", "--from", "lead", "--to", "w1", "--subject", fmt.Sprintf("live %d", i))
		out, err := cmd.Output()
		exited := float64(time.Now().UnixNano()) / 1e6
		if err != nil {
			tb.Fatalf("inbox send: %v\n%s", err, out)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			tb.Fatalf("inbox send: %v\n%s", err, out)
		}
		id := threadOf(tb, v)
		seen := wait[float64](p, "thread "+id+" on the page", `window.__seen[`+jsString(id)+`]`)
		push := eval[float64](p, `window.__pushed[`+jsString(id)+`] || 0`)
		shown = append(shown, seen-exited)
		if push > 0 {
			pushed = append(pushed, push-exited)
		}
	}
	return shown, pushed
}

// percentile is the q-th percentile of xs (nearest rank).
func percentile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	i := int(float64(len(s))*q/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// screenshot is a PNG of p's viewport.
func screenshot(tb testing.TB, p *tab) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, pageTimeout)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
