package cli

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// commands is the table that drives dispatch and help, in help order.
// Each entry, with its help text, is declared beside its runner in cmd_*.go.
var commands = []*command{
	initCommand,
	sendCommand,
	fetchCommand,
	claimCommand,
	renewCommand,
	updateCommand,
	replyCommand,
	doneCommand,
	failCommand,
	cancelCommand,
	listCommand,
	showCommand,
	waitReplyCommand,
	watchCommand,
	eventsCommand,
	daemonCommand,
	receiveCommand,
	checkCommand,
	mailboxCommand,
	pushCommand,
	runCommand,
	queueCommand,
	agentsCommand,
	teamCommand,
	ackCommand,
	mcpCommand,
	webCommand,
	hookCommand,
	runnerCommand,
	fsckCommand,
	reindexCommand,
	archiveCommand,
	migrateCommand,
	statsCommand,
	searchCommand,
	skillCommand,
	completionCommand,
}

func rootHelp(w io.Writer) {
	fmt.Fprint(w, `inbox — a durable coordination bus for AI agents on one machine.

Threads, messages, leases, read cursors and an event log live in a directory
(--db, else $INBOX_DB, else .agents/inbox). Every write is on disk before the
command exits, and any number of agents may use the store at once. On many
machines, --db nats://HOST:PORT/NAME runs the same commands on NATS
JetStream ("inbox-nats server" starts a local server for it).

As a worker, the normal loop is:

  inbox fetch   --agent me --json                       # 1. what is waiting for me?
  inbox claim   --agent me --thread T --json            # 2. own one thread (lease + token)
  inbox update  --agent me --thread T --status in_progress --summary "..."
  inbox update  --agent me --thread T --status blocked --summary "what is missing"
  inbox wait-reply --agent me --thread T --timeout-seconds 1800   # 3. block until the answer lands
  inbox done    --agent me --thread T --summary "result"   (or: inbox fail)

fetch never grants ownership; only claim does. Work only while you hold the
lease, renew it for long work, and never sleep-poll: wait-reply wakes you,
and while you wait in it with --agent it renews your lease for you.
As a leader: send work, list and show threads, reply to blocked workers,
cancel what is no longer needed.

In a team (seed 002's protocol): "inbox team create NAME MEMBER..." then
--to @NAME reaches every member once; --type/--content-json type a message,
--ack-required asks for "inbox ack", --request-id pairs a request with the
response "wait-reply --request-id" waits for.

Commands:
`)
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "  %-11s %s\n", c.name, c.short)
		}
	}
	fmt.Fprint(w, `
Global flags (before or after the command):
  --db PATH      store directory (env INBOX_DB, default .agents/inbox)
  --json         print one JSON object: {"ok":true,"command":...} or {"ok":false,"error":{...}}
  --agent NAME   your agent name (env INBOX_AGENT); also the default --from
  --lock-timeout D  how long to wait for a lock held by another process
                 before failing with 50 and naming it (default 30s)

Exit codes: 0 ok · 10 nothing to do (fetch empty, wait timed out) · 20 lease
conflict or stale token · 30 invalid input or transition · 40 not found ·
50 storage or internal error.

Run "inbox help COMMAND" or "inbox COMMAND --help" for details and examples.
`)
}

func commandHelp(w io.Writer, c *command) {
	args := ""
	if c.args != "" {
		args = " " + c.args
	}
	fmt.Fprintf(w, "inbox %s — %s\n\nUsage: inbox %s [flags]%s\n\n%s\n", c.name, c.short, c.name, args, c.long)
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.SortFlags = false
	cl := &call{cmd: c, fs: fs}
	c.new().flags(fs, cl)
	if fs.Lookup("agent") == nil {
		fs.String("agent", "", "your agent name (env INBOX_AGENT)")
	}
	fs.String("db", "", "store directory (env INBOX_DB, default "+defaultDB+")")
	fs.Bool("json", false, "print one JSON object instead of text")
	fs.String("lock-timeout", "", lockTimeoutUsage)
	fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsagesWrapped(100))
	if len(c.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	fmt.Fprintf(w, "\nExit codes: 0 ok · 10 nothing to do · 20 lease conflict · 30 invalid · 40 not found · 50 storage\n")
}
