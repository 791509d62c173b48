package webserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's chromium over the DevTools protocol
// (chromedp). Chromium is installed with apt-get when it is missing, once
// per test binary: a browser test never skips.

var (
	chromiumOnce sync.Once
	chromiumPath string
	chromiumErr  error
)

// chromium is the path of the chromium binary, installed on first use
// when missing (apt-get as root, else through sudo -n). The install runs
// before any test's own deadline starts, so that a first run in CI, which
// downloads the browser, only costs time.
func chromium(tb testing.TB) string {
	tb.Helper()
	chromiumOnce.Do(func() { chromiumPath, chromiumErr = installChromium() })
	if chromiumErr != nil {
		tb.Fatalf("the browser tests need chromium: %v", chromiumErr)
	}
	return chromiumPath
}

func installChromium() (string, error) {
	if p, err := findChromium(); err == nil {
		return p, nil
	}
	var sudo []string
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("sudo"); err != nil {
			return "", errors.New("it is not installed, and installing it needs root or sudo: apt-get install chromium")
		}
		sudo = []string{"sudo", "-n"}
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", errors.New("it is not installed, and there is no apt-get to install it with: install Debian's chromium package")
	}
	apt := func(args ...string) error {
		argv := append(append(append([]string(nil), sudo...), "apt-get"), args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
		}
		return nil
	}
	// Try with the package lists as they are, then refreshed.
	if err := apt("install", "-y", "--no-install-recommends", "chromium"); err != nil {
		if err := apt("update"); err != nil {
			return "", fmt.Errorf("installing it: %w", err)
		}
		if err := apt("install", "-y", "--no-install-recommends", "chromium"); err != nil {
			return "", fmt.Errorf("installing it: %w", err)
		}
	}
	p, err := findChromium()
	if err != nil {
		return "", fmt.Errorf("apt-get installed chromium, yet: %w", err)
	}
	return p, nil
}

func findChromium() (string, error) {
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	const debian = "/usr/bin/chromium"
	if _, err := os.Stat(debian); err != nil {
		return "", fmt.Errorf("no chromium on PATH nor at %s", debian)
	}
	return debian, nil
}

// newBrowser starts a headless chromium with a fresh profile for tb and
// returns its context; tabs are opened from it with newTab. The browser
// ends with tb.
//
// The flags keep chromium to the pages it is given: without the ones that
// stop its own background traffic (component updates, sync, QUIC probes),
// the closed network of a test machine refuses its connections and slows
// it down.
func newBrowser(tb testing.TB) context.Context {
	tb.Helper()
	path := chromium(tb)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	tb.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	if err := chromedp.Do(bctx); err != nil {
		tb.Fatalf("start chromium (%s): %v", path, err)
	}
	return bctx
}

// newTab opens a tab in a browser context of its own (its own cookies and
// storage), closed when tb ends.
func newTab(tb testing.TB, browser context.Context) context.Context {
	tb.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	tb.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("open a tab: %v", err)
	}
	return ctx
}

// tab is one tab of the browser, with what it logged, every request it
// sent and the status of every response, for the checks and for failure
// messages.
type tab struct {
	tb  testing.TB
	ctx context.Context
	// timeout bounds each wait on the tab (pageTimeout unless a
	// benchmark of a big store says otherwise).
	timeout time.Duration

	mu       sync.Mutex
	console  []string
	requests []string
	urls     map[network.RequestID]string
	statuses map[string][]int64 // by URL
}

// cspProbe runs in every document before its own scripts: it records what
// the page's Content-Security-Policy refused to load.
const cspProbe = `window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", e => window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI));`

// openTab opens a tab (a browser context of its own) and starts recording
// its console, its requests and their responses.
func openTab(tb testing.TB, browser context.Context) *tab {
	tb.Helper()
	return recordTab(tb, newTab(tb, browser))
}

// sibling opens another tab in p's browser context (the same cookies and
// storage, as a second tab of the same browser), recording as openTab's.
func (p *tab) sibling(tb testing.TB) *tab {
	tb.Helper()
	ctx, cancel := chromedp.NewContext(p.ctx)
	tb.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("open a tab: %v", err)
	}
	return recordTab(tb, ctx)
}

// recordTab starts recording the tab ctx's console, requests and
// responses.
func recordTab(tb testing.TB, ctx context.Context) *tab {
	tb.Helper()
	p := &tab{tb: tb, ctx: ctx, timeout: pageTimeout, urls: map[network.RequestID]string{}, statuses: map[string][]int64{}}
	err := chromedp.Listen(p.ctx, func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			p.requests = append(p.requests, ev.Request.URL)
			p.urls[ev.RequestID] = ev.Request.URL
		case *network.EventResponseReceivedExtraInfo:
			// Sent for a response a CORS check then hides from the page too.
			if u, ok := p.urls[ev.RequestID]; ok {
				p.statuses[u] = append(p.statuses[u], ev.StatusCode)
			}
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(p.ctx, pageTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspProbe}); err != nil {
		tb.Fatal(err)
	}
	messages := chromedp.Console(p.ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			p.mu.Lock()
			p.console = append(p.console, m.String())
			p.mu.Unlock()
		}
	}()
	return p
}

// pageTimeout bounds one wait on the page: generous, for a machine whose
// cores the tests share with others; a wait that passes ends at once.
const pageTimeout = 30 * time.Second

// do runs actions on the tab, failing the test with what the page shows
// and logged when one fails.
func (p *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) and
// decodes its value into T.
func eval[T any](p *tab, expr string) T {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// wait waits until the JavaScript expression is truthy and returns its
// value decoded into T.
func wait[T any](p *tab, what, expr string) T {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout+5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expr, chromedp.WithPollingTimeout(p.timeout)))
	if err != nil {
		p.fatalf("waiting for %s (%s): %v", what, expr, err)
	}
	return v
}

// waitFor waits until an element matches the CSS selector sel.
func (p *tab) waitFor(sel string) {
	p.tb.Helper()
	wait[chromedp.Void](p, sel, "document.querySelector("+jsString(sel)+")")
}

// show goes to a view of the page by its hash route (#/threads, …), as a
// link in the page does, without a reload, and waits until the view's
// root (data-view) is the one shown.
func (p *tab) show(route, view string) {
	p.tb.Helper()
	eval[chromedp.Void](p, "location.hash = "+jsString(route))
	p.waitFor(`[data-view="` + view + `"]`)
}

// fatalf fails the test with what the page shows and what it logged.
func (p *tab) fatalf(format string, args ...any) {
	p.tb.Helper()
	text := "(unreadable)"
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	if v, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`location.href + "\n" + (document.body ? document.body.innerText.slice(0, 3000) : "(no body)")`)); err == nil {
		text = v
	}
	p.mu.Lock()
	console := strings.Join(p.console, "\n  ")
	p.mu.Unlock()
	p.tb.Fatalf(format+"\n--- page:\n%s\n--- console:\n  %s", append(args, text, console)...)
}

// requested is every URL the tab has requested so far.
func (p *tab) requested() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// forget drops what the tab recorded of its requests and responses so far.
func (p *tab) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests, p.urls, p.statuses = nil, map[network.RequestID]string{}, map[string][]int64{}
}

// statusesOf are the HTTP statuses the tab got for u so far.
func (p *tab) statusesOf(u string) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.statuses[u]...)
}

// awaitStatuses is statusesOf(u) once the tab has recorded a response
// for u, or what it has at the deadline.
func (p *tab) awaitStatuses(u string, within time.Duration) []int64 {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if got := p.statusesOf(u); len(got) > 0 || time.Now().After(deadline) {
			return got
		}
		<-tick.C
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
