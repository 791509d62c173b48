// Command inbox-nats-server runs a NATS server with JetStream configured as
// inbox's NATS stores need it (package natsserve), in the foreground:
// inbox-nats server hands its command line to this binary, found beside
// it, so that the NATS server's code (about 14 MB, and 1.4 ms of package
// initialisation) is not loaded by every command on a nats:// store.
//
//	inbox-nats server [--listen HOST:PORT] [--store-dir DIR] [--verbose]
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox/internal/natsserve"
)

// Exit codes of inbox-nats server, those of SPEC §4.
const (
	exitOK      = 0
	exitLocked  = 20
	exitUsage   = 30
	exitStorage = 50
)

// defaultStoreDir is where the server stores unless told otherwise: beside
// a directory store's default, .agents/inbox.
const defaultStoreDir = ".agents/nats"

const serverUsage = `Usage: inbox-nats server [--listen HOST:PORT] [--store-dir DIR] [--verbose]

Run a NATS server with JetStream in the foreground, configured as inbox's
NATS stores need it: JetStream on, its streams in --store-dir, and every
write synced to disk before it is acknowledged (sync_interval: always), so
an acknowledged change survives a crash of the server or of the machine.
One server holds any number of stores, nats://HOST:PORT/NAME, one per team;
inbox init makes one. Only clients that give its secret get in: a random
token it makes at its first start in --store-dir/inbox-nats-server.secret,
a file only its user can read, and keeps across restarts; a client names
that file in INBOX_NATS_PASSWORD_FILE (the secret is never on a command
line nor in its log). It logs where it listens and the INBOX_DB and
INBOX_NATS_PASSWORD_FILE to use on stderr, and stops cleanly on Ctrl-C
(SIGINT) or SIGTERM.

Flags:
%s
Examples:
  inbox-nats server                               # this machine only, data in .agents/nats
  export INBOX_DB=nats://127.0.0.1:4222/myteam    # then, in another shell
  export INBOX_NATS_PASSWORD_FILE=$PWD/.agents/nats/inbox-nats-server.secret
  inbox init
  inbox send --from lead --to worker --subject "Add routes" --body "…"

  inbox-nats server --listen 127.0.0.1:0 --store-dir /tmp/try   # any free port: the log says which

It has no TLS: on loopback, only this machine's users see its traffic, and
only --store-dir's owner can read the secret. For agents on several
machines run nats-server itself, with accounts, TLS and (for R3) a
three-node cluster: docs/JETSTREAM.md.

Exit codes: 0 stopped by a signal; 20 another server uses --store-dir;
30 a bad flag; 50 the server could not start (its address taken, a store
directory it cannot use, a secret's file it did not make: a symlink,
anything but a regular file, one others can read).
`

// serverCmd is inbox-nats server's flags.
type serverCmd struct {
	listen, storeDir string
	verbose          bool
}

// runServer runs inbox-nats server with args until a signal on sig stops
// it, and returns its exit code.
func runServer(args []string, stdout, stderr io.Writer, sig <-chan os.Signal) int {
	var r serverCmd
	fs := pflag.NewFlagSet("inbox-nats server", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&r.listen, "listen", natsserve.DefaultListen, "where clients connect, HOST:PORT (127.0.0.1: this machine only; port 0: any free port)")
	fs.StringVar(&r.storeDir, "store-dir", defaultStoreDir, "where JetStream keeps its streams (made when missing)")
	fs.BoolVarP(&r.verbose, "verbose", "v", false, "also log the NATS server's notices (by default only its warnings and errors)")
	usage := func() string { return fmt.Sprintf(serverUsage, fs.FlagUsages()) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, usage())
			return exitOK
		}
		return serverFail(stderr, exitUsage, err.Error()+" (inbox-nats server --help lists the flags)")
	}
	if fs.NArg() > 0 {
		return serverFail(stderr, exitUsage, fmt.Sprintf("inbox-nats server takes no arguments, got %q (inbox-nats server --help)", fs.Arg(0)))
	}
	host, _, err := natsserve.SplitListen(r.listen)
	if err != nil {
		return serverFail(stderr, exitUsage, "--listen: "+err.Error())
	}
	s, err := natsserve.Start(natsserve.Config{Listen: r.listen, StoreDir: r.storeDir, Log: &serverLog{w: stderr, notices: r.verbose}})
	switch {
	case errors.Is(err, natsserve.ErrLocked):
		return serverFail(stderr, exitLocked, err.Error()+": stop it first, or give this one another --store-dir")
	case err != nil:
		return serverFail(stderr, exitStorage, err.Error())
	}
	url := s.URL()
	sync := "every write synced before it is acknowledged"
	if !s.SyncAlways() {
		sync = "writes NOT synced before they are acknowledged"
	}
	fmt.Fprintf(stderr, "inbox-nats: listening on %s (NATS JetStream, store directory %s, %s)\n", url, s.StoreDir(), sync)
	fmt.Fprintf(stderr, "inbox-nats: clients must give the secret in %s (only its user can read it; kept across restarts)\n", s.SecretFile())
	if !loopback(host) {
		fmt.Fprintf(stderr, "inbox-nats: warning: %s is reachable from other machines, and has no TLS: the secret and every message cross the network in clear, so keep it to a network you trust (else run nats-server with accounts and TLS: docs/JETSTREAM.md); a client on another machine needs a copy of the secret's file, 0600\n", r.listen)
		if h, err := os.Hostname(); err == nil && unspecified(host) {
			url = "nats://" + net.JoinHostPort(h, strconv.Itoa(port(url)))
		}
	}
	// The secret travels by file: the line names it, and export, a shell
	// builtin, puts nothing in any process's argv.
	fmt.Fprintf(stderr, "inbox-nats: hint: export INBOX_DB=%s/myteam INBOX_NATS_PASSWORD_FILE=%s && inbox init   (myteam: any store name of letters, digits, _ and -)\n", url, shellQuote(s.SecretFile()))
	fmt.Fprintln(stderr, "inbox-nats: hint: Ctrl-C or SIGTERM stops it")
	got := <-sig
	s.Stop()
	fmt.Fprintf(stderr, "inbox-nats: stopped (%v)\n", got)
	return exitOK
}

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(runServer(os.Args[1:], os.Stdout, os.Stderr, sig))
}

func serverFail(stderr io.Writer, code int, msg string) int {
	fmt.Fprintf(stderr, "inbox-nats: error: %s\n", msg)
	return code
}

// loopback reports whether host is reachable from this machine only.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// shellQuote returns p as a shell word: as it is when it holds nothing a
// shell reads specially, else in single quotes.
func shellQuote(p string) string {
	plain := p != ""
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-+,:@%=", c)) {
			plain = false
			break
		}
	}
	if plain {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// unspecified reports whether host means every interface.
func unspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// port is the port of a nats://HOST:PORT URL.
func port(url string) int {
	i := strings.LastIndexByte(url, ':')
	p, _ := strconv.Atoi(url[i+1:])
	return p
}

// serverLog writes the NATS server's log lines on stderr: its warnings
// and errors always, its notices when asked.
type serverLog struct {
	w       io.Writer
	notices bool
}

func (l *serverLog) Notice(line string) {
	if l.notices {
		fmt.Fprintf(l.w, "inbox-nats: nats: %s\n", line)
	}
}

func (l *serverLog) Warn(line string) { fmt.Fprintf(l.w, "inbox-nats: nats: warning: %s\n", line) }

func (l *serverLog) Error(line string) { fmt.Fprintf(l.w, "inbox-nats: nats: error: %s\n", line) }
