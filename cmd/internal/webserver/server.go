// Package webserver is `inbox web` (SPEC §15): a live dashboard of one
// store for the people who run the agents, and the JSON API it is a thin
// view over. Every read endpoint returns what the matching CLI command
// prints with --json (it runs the command in-process, cli.Invoke); the
// needs-attention list and the wait graph come from the rules in package
// inbox; the live stream follows the event log once (Bus.Follow) and
// pushes each event to every open page over Server-Sent Events, so the
// page never polls and a page that reconnects resumes from its last event
// id. The page itself (assets/) is embedded: go build alone builds it and
// it loads nothing from outside the server's origin.
//
// It is only as open as the store: loopback only; a bearer token drawn
// at start and written to a file only the store's owner can read, for
// scripts; single-use launch URLs for browsers, each traded for a session
// whose secret only the page's script holds (the cookie, which other
// ports of the host receive too, carries its id alone); Host and Origin
// checked; connections held to localhttp's limits.
package webserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/cmd/internal/localhttp"
)

// Serve serves the dashboard of cfg.Bus until ctx ends.
func Serve(ctx context.Context, cfg cli.WebConfig) error {
	ln, err := localhttp.Listen(cfg.Addr)
	if err != nil && cfg.AnyPort && errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(cfg.Addr)
		fmt.Fprintf(cfg.Stderr, "inbox web: %s is in use, taking a free port\n", cfg.Addr)
		ln, err = localhttp.Listen(net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return err
	}
	defer ln.Close()
	token, revoke, err := localhttp.IssueToken(cfg.TokenFile)
	if err != nil {
		return err
	}
	defer revoke()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newServer(ctx, cfg, ln.Addr().(*net.TCPAddr).Port, token)
	host := "127.0.0.1"
	if ip := ln.Addr().(*net.TCPAddr).IP; ip.To4() == nil {
		host = "[::1]"
	}
	s.origin = "http://" + host + ":" + strconv.Itoa(s.port)
	printed, err := s.launchURL(true, nil)
	if err != nil {
		return err
	}
	if cfg.OpenFile != "" {
		remove, err := s.writeOpenFile(cfg.OpenFile)
		if err != nil {
			return err
		}
		defer remove()
	}
	go s.hub.run(ctx)
	// A wait starting or ending is in no event: the bus says when, the
	// answers that show it go stale and the pages are told. Its first call
	// says it is armed: what is computed from then on sees every wait, so
	// the answers a page needs first are computed then (not before, which
	// that call would make stale, nor on the first page's time).
	armed := make(chan struct{})
	go func() {
		first := true
		s.cfg.Bus.FollowPresence(ctx, inbox.WaitOptions{}, func() {
			if first {
				first = false
				close(armed)
				return
			}
			s.cache.invalidate()
			s.hub.presence()
		})
		if first {
			close(armed) // it could not follow presence: warm up all the same
		}
	}()
	go func() {
		select {
		case <-armed:
			s.warmUp(ctx)
		case <-ctx.Done():
		}
	}()
	srv := localhttp.NewServer(s.handler(),
		slog.NewLogLogger(slog.NewTextHandler(cfg.Stderr, nil).WithAttrs([]slog.Attr{slog.String("server", "inbox web")}), slog.LevelWarn))
	srv.RegisterOnShutdown(s.hub.close) // the streams end, so that the server can stop
	if cfg.Ready != nil {
		cfg.Ready(printed, token)
	}
	if err := localhttp.Serve(ctx, srv, ln); err != nil {
		return fmt.Errorf("serve HTTP: %w", err)
	}
	return nil
}

// launchURL is a new launch URL (session.go): the page's address with a
// launch token, good for one visit. A pinned one (the printed URL, the
// one --open opens) is never dropped for newer ones; used is called
// once it is traded.
func (s *server) launchURL(pinned bool, used func()) (string, error) {
	tok, err := s.sessions.newLaunch(pinned, used)
	if err != nil {
		return "", err
	}
	return s.origin + "/?token=" + tok, nil
}

// writeOpenFile writes, at path, the page --open opens: an owner-only
// HTML file that sends the browser on to a launch URL of its own, so that
// no command line (the opener's, readable in /proc by every user) carries
// a secret that lasts. The file goes once its launch token is used, or
// with remove (at exit), if it still holds what was written.
func (s *server) writeOpenFile(path string) (remove func(), err error) {
	var (
		mu      sync.Mutex
		content string
		once    sync.Once
	)
	remove = func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			localhttp.RemoveIfHolds(path, content)
		})
	}
	u, err := s.launchURL(true, func() { go remove() })
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	content = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0;url=` + u + `">
<title>inbox web</title>
</head>
<body>
<p>Opening <a href="` + u + `">the dashboard</a>…</p>
</body>
</html>
`
	if err := localhttp.WriteSecretFile(path, content); err != nil {
		return nil, fmt.Errorf("write the page --open opens: %w", err)
	}
	return remove, nil
}

// server is one dashboard: the store, this start's token and the hub
// that fans the event log out to the open pages.
type server struct {
	cfg   cli.WebConfig
	port  int
	token string
	// origin is http://HOST:PORT, what a launch URL starts with.
	origin string
	// cookie is the session cookie's name: inbox_web_PORT, since cookies
	// do not tell ports apart.
	cookie   string
	sessions *sessions
	hub      *hub
	// tracker keeps what the needs-attention list and the wait graph
	// need of the event log, so that a call reads only the new events.
	tracker *inbox.AttentionTracker
	// cache keeps the answers that read the whole store (agents, the
	// wait graph) while no event comes.
	cache *cache
}

func newServer(ctx context.Context, cfg cli.WebConfig, port int, token string) *server {
	if cfg.As == "" {
		cfg.As = "human"
	}
	s := &server{cfg: cfg, port: port, token: token, tracker: inbox.NewAttentionTracker(cfg.Bus),
		origin: "http://127.0.0.1:" + strconv.Itoa(port), cookie: "inbox_web_" + strconv.Itoa(port), sessions: newSessions(),
		cache: newCache(ctx, cfg.Bus.LastEventID)}
	s.hub = newHub(cfg.Bus)
	s.hub.feed = func(ev *inbox.Event) { s.tracker.Feed(ctx, ev) }
	return s
}

// warmUp computes what reads the whole store or log, the agents first
// (the first view), then the attention tracker's first reading of the log
// and the wait graph.
func (s *server) warmUp(ctx context.Context) {
	s.cachedRun(ctx, "agents", nil)
	s.tracker.Attention(ctx, time.Now(), inbox.AttentionOptions{})
	s.cache.get(ctx, "waits", s.waitsJSON)
}

// handler is every route behind the guard.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.Handle("GET /assets/", assetHandler())
	mux.HandleFunc("GET /api/info", s.info)
	mux.HandleFunc("GET /api/agents", s.command("agents"))
	mux.HandleFunc("GET /api/threads", s.command("list", "status", "agent", "created-by", "assigned-to", "limit", "mail", "run", "task", "team"))
	mux.HandleFunc("GET /api/threads/{id}", s.thread)
	mux.HandleFunc("GET /api/threads/{id}/events", s.threadEvents)
	mux.HandleFunc("POST /api/threads/{id}/answer", s.answer)
	mux.HandleFunc("POST /api/threads/{id}/cancel", s.cancel)
	mux.HandleFunc("GET /api/queue", s.command("queue --all"))
	mux.HandleFunc("GET /api/teams", s.command("team list"))
	mux.HandleFunc("GET /api/search", s.search)
	mux.HandleFunc("GET /api/attention", s.attention)
	mux.HandleFunc("GET /api/waits", s.waits)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/blobs/{sha}", s.blob)
	mux.HandleFunc("POST /api/launch", s.launch)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "web", "not_found", "", "no such API endpoint: "+r.Method+" "+r.URL.Path)
	})
	return s.guard(securityHeaders(mux))
}
