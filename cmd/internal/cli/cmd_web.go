package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

var webCommand = &command{
	name: "web", short: "serve a live dashboard of the store in the browser",
	long: `Serve a live web dashboard of this store (a directory or a NATS bus) for
the people who run the agents: who is working, waiting, idle or gone; what
needs a person (blocked questions, requests without a response, unacknowledged
messages, expired leases, agents gone with a lease, failed tasks); who waits on
whom, with deadlocks flagged; the threads by status with each transcript; the
task queue; the teams; the live event feed; and search. Every view is pushed
from the event log as it changes: the page never polls and never reloads.

It prints a launch URL to open: it opens the dashboard in one browser, once
(a second browser gets a URL of its own from POST /api/launch). --open opens
the browser on a page of its own, an owner-only file beside the token file,
so that no command line carries a secret. The page can answer a blocked
question (as --as, default human, or a name typed on the page) and cancel a
thread; nothing else changes anything.

The same server is a JSON API for scripts (send "Authorization: Bearer TOKEN"):
  GET  /api/agents /api/threads?status=… /api/threads/ID /api/queue
       /api/teams /api/search?q=…   (the matching command's --json)
  GET  /api/attention /api/waits    (needs attention; the wait graph)
  GET  /api/events                  (Server-Sent Events; Last-Event-ID resumes)
  POST /api/threads/ID/answer {"from","summary","body"}
  POST /api/threads/ID/cancel {"agent","reason"}
  POST /api/launch                  (a new launch URL: {"url":…})
A command's exit code is the HTTP status: 200, 400 for 30, 404 for 40, 409
for 20, 500 for 50; no token is 401.

It is only as open as the store: it listens on loopback only; the token is
new at every start and written to a file only its user can read (--token-file;
by default web.token inside a directory store, or
$XDG_CONFIG_HOME/inbox/web-nats-HASH.token for a nats:// store), removed at
exit. A launch URL's visit is traded for a session that ends with the server:
its cookie alone (which other ports of the host receive too) opens only the
page's shell, the API needs the secret the page's script keeps. A foreign
Host or a foreign Origin is refused. Stop it with Ctrl-C.`,
	examples: []string{
		"inbox web",
		"inbox web --addr 127.0.0.1:8080 --open",
		"inbox web --as alice --json   # first line: the URL and token",
	},
	new: func() runner { return &webCmd{} },
}

// defaultWebAddr is where inbox web listens when --addr is not given; if
// that port is taken it takes any free loopback port instead.
const defaultWebAddr = "127.0.0.1:7878"

type webCmd struct {
	addr      string
	as        string
	open      bool
	tokenFile string
}

func (r *webCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.addr, "addr", defaultWebAddr, "loopback address to serve on (127.0.0.1:PORT; PORT 0 takes a free one)")
	fs.StringVar(&r.as, "as", "human", "the agent a person's answers from the page are sent as")
	fs.BoolVar(&r.open, "open", false, "open the dashboard in the browser once it listens (through an owner-only page beside the token file)")
	fs.StringVar(&r.tokenFile, "token-file", "", "write the token here, owner-only (default: web.token in a directory store)")
}

// WebConfig is what the dashboard server is given: the open store and
// the settings of this start.
type WebConfig struct {
	Bus inbox.Bus
	DB  string
	// Addr is the loopback address to listen on; AnyPort lets the
	// server take a free port when Addr's is taken.
	Addr    string
	AnyPort bool
	// As is the default sender of an answer given from the page.
	As string
	// TokenFile is where the server writes the token every request
	// must carry (owner-only, replaced at every start, removed at exit).
	TokenFile string
	// Getenv is the environment the API's commands see.
	Getenv  func(string) string
	Stderr  io.Writer
	Version string
	// OpenFile, when set, is where the server writes the page --open
	// opens (owner-only, removed once used or at exit), before Ready.
	OpenFile string
	// Ready is called once the server listens, with the launch URL to
	// print (good for one visit) and the bearer token.
	Ready func(url, token string)
}

// ServeWeb serves `inbox web` in this process when set (the inbox-web and
// inbox-nats binaries set it); otherwise the command runs the inbox-web
// binary, so that the server and its assets stay out of every other
// command's start.
var ServeWeb func(ctx context.Context, cfg WebConfig) error

// webBinary is the name of the binary that serves the dashboard.
const webBinary = "inbox-web"

func (r *webCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	if err := loopbackAddr("addr", r.addr); err != nil {
		return nil, err
	}
	if err := inbox.ValidateAgent("as", r.as); err != nil {
		return nil, err
	}
	if ServeWeb == nil {
		return nil, execCompanion(c, webBinary, "web_not_installed", "inbox web")
	}
	tokenFile, err := tokenFilePath("web", r.tokenFile, c.g.db, c.env.getenv)
	if err != nil {
		return nil, err
	}
	bus, err := c.open()
	if err != nil {
		return nil, err
	}
	ctx, stop := c.blockingContext()
	defer stop()
	// --open opens a page of the server's, beside the token file, that
	// sends the browser on to a launch URL of its own: the opener's
	// command line, which every local user can read, carries its path
	// only, and the printed URL stays for the user.
	openFile := ""
	if r.open {
		openFile = filepath.Join(filepath.Dir(tokenFile), strings.TrimSuffix(filepath.Base(tokenFile), ".token")+"-open.html")
	}
	ready := func(launch, token string) {
		res := &result{}
		res.set("url", launch).set("token", token).set("token_file", tokenFile)
		res.human = func(w io.Writer) {
			fmt.Fprintf(w, "inbox web: open %s (one browser, once; POST /api/launch with the token makes another)\n", launch)
			fmt.Fprintf(w, "inbox web: token file %s (scripts send \"Authorization: Bearer \" and its content); stop with Ctrl-C\n", tokenFile)
		}
		emit(c.env, c.g, "web", res)
		if openFile != "" {
			openBrowser((&url.URL{Scheme: "file", Path: openFile}).String(), c.env.stderr)
		}
	}
	err = ServeWeb(ctx, WebConfig{Bus: bus, DB: c.g.db, Addr: r.addr, AnyPort: !c.fs.Changed("addr"), As: r.as,
		TokenFile: tokenFile, OpenFile: openFile, Getenv: c.env.getenv, Stderr: c.env.stderr, Version: buildVersion(), Ready: ready})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, inbox.Errorf(inbox.ErrConflict, "address_in_use", "addr", "--addr %s is in use: give another port, or 127.0.0.1:0 for any free one", r.addr)
		}
		return nil, inbox.Internal(fmt.Errorf("web: %w", err))
	}
	return nil, nil
}

// openBrowser opens target with the desktop's opener, saying on stderr
// when there is none (the URL is printed either way).
func openBrowser(target string, stderr io.Writer) {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, target)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "inbox web: cannot open a browser (%v): open the URL above by hand\n", err)
		return
	}
	go cmd.Wait()
}

// execCompanion replaces this process with the companion binary bin
// (beside this one, else on PATH), given the same arguments; what names
// the command for the error when it is missing.
func execCompanion(c *call, bin, code, what string) error {
	path := companion(bin)
	if path == "" {
		return inbox.Errorf(inbox.ErrNotFound, code, "",
			"%s runs the %s binary, found neither beside this one nor on PATH: build both with go build -o bin/ ./cmd/... (or go install ./cmd/...)", what, bin)
	}
	err := syscall.Exec(path, append([]string{bin}, c.raw...), os.Environ())
	return inbox.Internal(fmt.Errorf("run %s: %w", path, err))
}

// tokenFilePath is where an HTTP server (what: mcp or web) writes its
// token: given as is (made absolute), else WHAT.token inside a directory
// store, else (a nats:// store) WHAT-nats-HASH.token in the user's
// configuration directory, $XDG_CONFIG_HOME/inbox or $HOME/.config/inbox,
// HASH naming the store without its credentials.
func tokenFilePath(what, given, db string, getenv func(string) string) (string, error) {
	if given != "" {
		p, err := filepath.Abs(given)
		if err != nil {
			return "", usagef("token-file", "--token-file %q: %v", given, err)
		}
		return p, nil
	}
	if !strings.Contains(db, "://") {
		dir, err := filepath.Abs(db)
		if err != nil {
			return "", usagef("db", "--db %q: %v", db, err)
		}
		return filepath.Join(dir, what+".token"), nil
	}
	dir := ""
	if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		dir = filepath.Join(d, "inbox")
	} else if h := getenv("HOME"); filepath.IsAbs(h) {
		dir = filepath.Join(h, ".config", "inbox")
	} else {
		return "", usagef("token-file", "a nats:// store keeps the %s token in $XDG_CONFIG_HOME/inbox or $HOME/.config/inbox, and neither is set: give --token-file", what)
	}
	return filepath.Join(dir, what+"-nats-"+storeHash(db)+".token"), nil
}
