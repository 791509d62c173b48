package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// commands is the table that drives dispatch and help, in help order.
var commands = []*command{
	{name: "init", short: "create the store (safe to repeat)",
		long: `Create an inbox store: a directory holding threads, messages, leases, read
cursors, an event log and an index. Running it again on an existing store
changes nothing. Every other command needs the store to exist.

The store is --db, else $INBOX_DB, else .agents/inbox in the current
directory. Directories are 0700 and files 0600; --shared makes them 0770 and
0660 for a group of users.`,
		examples: []string{"inbox init", "inbox init --db .agents/coord.db"},
		new:      func() runner { return &initCmd{} }},

	{name: "send", args: "[AGENT MESSAGE...]", short: "give an agent work, mail it a note, or add to a thread",
		long: `Work: with --subject (and no --thread), send creates a new thread assigned to
--to, in status pending, whose first message (kind task) you write. That
thread is what the recipient's "inbox fetch" shows until it claims it.

Mail: without --subject, or with a --kind other than task, the message is a
note, not work: it lands in the recipient's mailbox (inbox receive / check /
mailbox) and in no one's fetch. "inbox send AGENT MESSAGE..." is the short
form (from --from, INBOX_AGENT, else main), e.g. a task reporting progress
to its parent.

In a thread: with --thread, send adds a message of any kind to a live
thread; --subject then becomes the message's summary, and --run, --task and
--priority must match the thread's.

The output names the thread id; keep it to watch or answer the thread.`,
		examples: []string{
			`inbox send --from leader --to backend-worker --subject "Add post CRUD routes" --body "Routes under /posts; see docs/api.md" --task T4`,
			`inbox send --from leader --to backend-worker --subject "Hotfix login" --priority high --json`,
			`inbox send "$INBOX_PARENT" "Phase 1 complete"`,
			`inbox send --from leader --thread thr_01... --kind task --body "Also cover DELETE"`,
		},
		new: func() runner { return &sendCmd{} }},

	{name: "fetch", short: "list work waiting for an agent (never claims)",
		long: `Worker step 1: see which threads are waiting for you. fetch lists threads
assigned to --agent in the given statuses (default pending,blocked) that no
other agent holds a live lease on: high priority first, then oldest. It
changes nothing and grants nothing; only claim gives you a thread.

--unread keeps only threads with a message from someone else that you have
not marked read (show --mark-read): use it to see which of your blocked
threads got an answer.

Exit 10 (not an error) when nothing is waiting. fetch is the worker's view;
"inbox list" is the leader's filter over all threads.`,
		examples: []string{
			"inbox fetch --agent backend-worker --json",
			"inbox fetch --agent backend-worker --status pending --limit 1 --json",
			"inbox fetch --agent backend-worker --unread",
		},
		new: func() runner { return &fetchCmd{} }},

	{name: "claim", short: "take the lease on a thread before working on it",
		long: `Worker step 2: own a thread. claim gives --agent the thread's lease for
--lease-seconds (default 900): the status becomes claimed and assigned_to
becomes you. Only one agent holds a live lease; a second claimer gets exit 20
(lease_conflict). Claiming a thread whose lease expired succeeds, and the
holder may claim again.

Each claim returns a lease_token that is larger than every earlier one on the
thread. Pass it as --lease-token to update, renew, done and fail so that a
worker whose lease was taken over is refused (exit 20) instead of
overwriting the new holder's work. Renew before the lease runs out.`,
		examples: []string{
			"inbox claim --agent backend-worker --thread thr_01... --json",
			"inbox claim --agent backend-worker --thread thr_01... --lease-seconds 1800",
		},
		new: func() runner { return &claimCmd{} }},

	{name: "renew", short: "extend your lease",
		long: `Extend the lease you hold to --lease-seconds from now (default 900). Only the
holder may renew, and only while the lease is live; after it expires, claim
again. With --lease-token, a stale token is refused with exit 20.`,
		examples: []string{"inbox renew --agent backend-worker --thread thr_01... --lease-seconds 900 --lease-token 3"},
		new:      func() runner { return &claimCmd{renew: true} }},

	{name: "update", short: "post progress, or say you are blocked and why",
		long: `Worker step 3: tell the thread where you are. Only the lease holder may
update. --status in_progress posts a progress message. --status blocked
posts a question: the --summary must say exactly what is missing, and the
leader answers with "inbox reply". Then wait for the answer with
"inbox wait-reply" instead of sleeping.`,
		examples: []string{
			`inbox update --agent backend-worker --thread thr_01... --status in_progress --summary "Implementing post CRUD routes" --json`,
			`inbox update --agent backend-worker --thread thr_01... --status blocked --summary "Need auth decision" --payload-json '{"question":"email/password or OAuth for MVP?"}' --json`,
		},
		new: func() runner { return &holderCmd{verb: "update"} }},

	{name: "reply", short: "answer or comment inside a thread (anyone)",
		long: `Append a message to a live thread; anyone may reply. This is how a leader
answers a blocked worker (--kind answer), steers it (--kind control), or how
anyone asks a follow-up (--kind question) or notes progress. --to defaults to
the other party of the thread. reply never changes the thread's status.`,
		examples: []string{
			`inbox reply --from leader --thread thr_01... --kind answer --summary "Use email/password for MVP" --body "Keep it simple for now." --json`,
		},
		new: func() runner { return &replyCmd{} }},

	{name: "done", short: "finish the thread with its result",
		long: `Worker's last step on success: the holder marks the thread done with a result
message (kind result) addressed to the thread's creator. --summary is
required; put the details in --body, --body-file, --payload-json or
artifacts. The lease is released and the thread is terminal.`,
		examples: []string{
			`inbox done --agent backend-worker --thread thr_01... --summary "Post CRUD implemented" --body-file result.md --artifact patch.diff --artifact-kind patch --json`,
		},
		new: func() runner { return &holderCmd{verb: "done"} }},

	{name: "fail", short: "give up on the thread, saying why",
		long: `Worker's last step when the work cannot be done: the holder marks the thread
failed with a result message whose --summary says why. The lease is released
and the thread is terminal. Deciding whether to retry belongs to the leader.`,
		examples: []string{`inbox fail --agent backend-worker --thread thr_01... --summary "Tests need a database this machine lacks" --json`},
		new:      func() runner { return &holderCmd{verb: "fail"} }},

	{name: "cancel", short: "stop a thread (leader override)",
		long: `Cancel a live thread: its status becomes cancelled (terminal), any lease is
released, and a control message carrying --reason goes to the assignee, so a
worker waiting with wait-reply wakes up. Any agent may cancel: it is the
leader's override.`,
		examples: []string{`inbox cancel --agent leader --thread thr_01... --reason "Superseded by T9"`},
		new:      func() runner { return &cancelCmd{} }},

	{name: "list", short: "filter all threads (leader's view)",
		long: `List threads across all agents, newest first, filtered by --status,
--created-by, --assigned-to and --agent (created by or assigned to). Unlike
fetch, which shows a worker the work it could claim next (and hides threads
leased by others), list shows every thread that matches, whatever its lease,
and exits 0 even when nothing matches.`,
		examples: []string{
			"inbox list --status blocked",
			"inbox list --assigned-to backend-worker --status done,failed --limit 10 --json",
			"inbox list --created-by leader",
		},
		new: func() runner { return &listCmd{} }},

	{name: "show", short: "inspect one thread's full history",
		long: `The thread-history inspection command: print one thread with its header,
lease and every message in order, with artifacts. fetch and list only show
headers; show is where you read the conversation. --mark-read moves
--agent's read cursor to the latest message shown, which is what
"fetch --unread" compares against.`,
		examples: []string{
			"inbox show --thread thr_01...",
			"inbox show --thread thr_01... --mark-read --agent backend-worker --json",
		},
		new: func() runner { return &showCmd{} }},

	{name: "wait-reply", short: "block until an answer lands in a thread",
		long: `The normal wait primitive for a blocked worker: block until the thread has a
message of one of --kinds (default answer,control,result) later than the
cursor, then print it. It returns at once if such a message already exists.
It wakes the moment the message is written (file notifications on the event
log, not a sleep loop) and never misses one that lands while it starts.

Pass your agent name (--agent or INBOX_AGENT): then the wait starts after
your read cursor in the thread, so an answer that landed just before you
started waiting is returned at once, and the message returned moves your
cursor, so it is never returned twice. Or give the cursor yourself:
--after-event N (the next_event_id of an earlier output) or --after-message
ID. With no cursor and no agent, only messages written after the call starts
count. The output's next_event_id is the cursor for the next wait. On a
thread that is already done, failed or cancelled it returns at once with the
message that ended it. On timeout it exits 10 with "woke":false.

wait-reply waits on one thread for messages; "inbox watch" waits on all of an
agent's threads for new threads and status changes.`,
		examples: []string{
			"inbox wait-reply --agent backend-worker --thread thr_01... --timeout-seconds 1800 --json",
			"inbox wait-reply --thread thr_01... --after-event 51 --kinds answer,control --json",
		},
		new: func() runner { return &waitReplyCmd{} }},

	{name: "watch", short: "block until an agent gets a new thread or a status change",
		long: `Block until something happens to --agent's threads after the call starts (or
after --after-event N): a new thread assigned to it, or a thread it is
assigned to or created changing status (only the statuses in --status, if
given). Prints the event and the thread, and next_event_id to continue from.
Exit 10 with "woke":false on timeout.

Use watch as a leader waiting for results (--status done,failed,blocked) or as
an idle worker waiting for work (--status pending); use wait-reply to wait for
messages inside one thread.`,
		examples: []string{
			"inbox watch --agent backend-worker --status pending --timeout-seconds 600 --json",
			"inbox watch --agent leader --status done,failed,blocked --json",
		},
		new: func() runner { return &watchCmd{} }},

	{name: "events", short: "print or follow the event log",
		long: `Print the store's event log: every state change, in order, with its
monotonic event_id. --thread keeps one thread's events, --after-event starts
after a cursor. --follow keeps streaming new events as they are appended
until interrupted; with --json each event is then one JSON object per line,
for leaders and orchestrators that tail the bus.`,
		examples: []string{
			"inbox events --thread thr_01...",
			"inbox events --after-event 120 --follow --json",
		},
		new: func() runner { return &eventsCmd{} }},

	{name: "daemon", short: "serve the intake directory and expire leases (long-running)",
		long: `Run in the foreground until SIGINT or SIGTERM. The daemon turns every
NAME.task.json descriptor dropped into --intake (default <db>/intake) into a
thread, then writes NAME.task.json.result and renames the descriptor to
.processed (or .failed, with the reason in .result); when the thread reaches
done, failed or cancelled it writes NAME.task.json.outcome with the final
status and the last message. It also releases expired leases (lease_expired
events) so those threads can be claimed again. Other file names are ignored.

Descriptors ("version":1): {"kind":"prompt","prompt":…} makes a task thread
for --intake-to; {"kind":"send",…} carries the fields of inbox send (from, to,
subject, thread, run_id, task_id, message_kind, summary, body, payload,
priority, artifacts); {"kind":"spawn_worker","agent_type":…,"name":…,"prompt":…}
is refused unless --trust-all. Write descriptors to a temp name and rename
them into place. Logs are structured lines on stderr (JSON with --json).

Only one daemon may serve a store; a second one exits 20.`,
		examples: []string{
			"inbox daemon",
			"inbox daemon --intake ~/.inbox-intake --intake-to coordinator --json",
			`echo '{"version":1,"kind":"prompt","prompt":"Summarise today"}' > .agents/inbox/intake/daily.tmp && mv .agents/inbox/intake/daily.tmp .agents/inbox/intake/daily.task.json`,
		},
		new: func() runner { return &daemonCmd{} }},

	{name: "receive", short: "wait for a message in your mailbox and collect it",
		long: `Your mailbox holds every message addressed to you, in any thread, that you
have not collected. receive blocks until one is there (oldest first; --lifo
newest first; --from only that sender's), collects it and prints it. Each
message is collected once, even when two of your processes receive at the
same time; collected messages stay in their threads (show still has them).
Exit 10 with "woke":false on timeout. The agent is --agent, else
INBOX_AGENT, else main.

Task results arrive here: a finished task's output is a result message from
the task's name to its parent.`,
		examples: []string{
			"inbox receive --json",
			"inbox receive --agent main --from analyzer --timeout-seconds 600",
		},
		new: func() runner { return &receiveCmd{} }},

	{name: "check", short: "collect every ready message, without waiting",
		long: `Like receive, but never waits: collects and prints every message ready in
your mailbox (oldest first; --lifo newest first; --from one sender's). Exit
10 when there is none.`,
		examples: []string{"inbox check --json", "inbox check --from worker --lifo"},
		new:      func() runner { return &receiveCmd{all: true} }},

	{name: "mailbox", short: "look at your mailbox without collecting",
		long: `Show what waits in your mailbox — who sent it and how long ago — without
collecting anything.`,
		examples: []string{"inbox mailbox", "inbox mailbox --agent implementer --json"},
		new:      func() runner { return &receiveCmd{peek: true} }},

	{name: "push", args: "PROMPT", short: "queue a task for a sub-agent (returns at once)",
		long: `Queue a task: PROMPT (the words after the flags, or - to read stdin) is what
the sub-agent is asked to do. --name is the task's name and the sub-agent's
agent name (generated and unique when omitted); --parent is who gets its
result (default --agent, else main). Nothing runs until "inbox run".`,
		examples: []string{
			`inbox push --name research "Research the API and summarise the auth flow"`,
			`inbox push --timeout-seconds 300 --model fast "Refactor file1.c"`,
		},
		new: func() runner { return &pushCmd{} }},

	{name: "run", args: "[N]", short: "start the queued tasks, N at a time (returns at once)",
		long: `Start your queued tasks (all of them at once, or N at a time) and return at
once: a detached runner runs each as "sh -c CMD" in its own process group,
with the prompt on stdin and INBOX_TASK_NAME (also INBOX_AGENT),
INBOX_THREAD, INBOX_PARENT, INBOX_MODEL and INBOX_DB set, so the task can
use inbox itself (send progress to its parent, push sub-tasks). The runner
survives the calling shell.

When a task exits 0 its stdout is delivered to the parent's mailbox as a
result message from the task's name. When it fails, or passes its
--timeout-seconds (its whole process group is killed), the message's
payload is {"success":false,"error":…,"partial_output":…}. A task whose
runner dies is reported failed the same way by the next queue, run,
receive or check. Collect results with receive or check.`,
		examples: []string{
			`inbox run --exec 'claude -p "$(cat)"'`,
			`INBOX_EXEC='./agent.sh' inbox run 2`,
		},
		new: func() runner { return &runCmd{} }},

	{name: "queue", short: "show queued, running and finished tasks",
		long: `Show your tasks: queued (pushed, not started), running (with how long ago
they started) and finished (done or failed). Results themselves arrive in
your mailbox.`,
		examples: []string{"inbox queue", "inbox queue --json"},
		new:      func() runner { return &queueCmd{} }},

	{name: "agents", short: "every agent the store has seen, with activity, leases and mail",
		long: `List every agent the store has seen, as sender or recipient, with its state,
when it was last seen (in any role) and last acted (null if it never has),
its live leases, open threads assigned to it and mailbox depth.

States: working (holds a live lease); waiting (a process is blocked for it
right now in receive, wait-reply or watch, proven by a lock that process
holds, not by a timestamp); gone (its lease ran out unreleased, or its
process died while waiting, and it has not acted since); idle (anything
else). That is how a leader tells an idle agent from a dead one. Sending to
an agent that never acted here warns and names close matches.`,
		examples: []string{"inbox agents", "inbox agents --json"},
		new:      func() runner { return &agentsCmd{} }},

	{name: "__runner", hidden: true, short: "internal: the detached task runner",
		new: func() runner { return &runnerCmd{} }},

	{name: "fsck", short: "check the store's invariants; --repair fixes what a crash left",
		long: `Check every invariant the store promises: event-log lines whole, checksummed
and in increasing order; each thread's header agreeing with its messages;
each message having its event; lease files agreeing with their threads; the
index agreeing with the headers; no stray temp files or stale records.
Exit 0 when clean; otherwise exit 50 and list the findings.

--repair fixes what a crash can leave half-done (cuts a torn log tail,
appends missing events, removes uncommitted leftovers, rewrites lease
files, fixes the index) while holding every lock of the store, so writers
wait for it. It exits 0 when everything found was repaired.`,
		examples: []string{"inbox fsck", "inbox fsck --repair --json"},
		new:      func() runner { return &fsckCmd{} }},

	{name: "reindex", short: "rebuild the index from the thread files",
		long: `Rebuild the index that fetch and list read (derived data) from the thread
headers alone. Safe at any time; writers wait while it runs.`,
		examples: []string{"inbox reindex"},
		new:      func() runner { return &reindexCmd{} }},

	{name: "archive", short: "move old finished threads out of the live tree",
		long: `Move threads in a terminal status (--status, default done,failed,cancelled)
last updated longer ago than --older-than into <db>/archive, where
"inbox show" still reads them (read-only) but fetch, list and the index no
longer see them; also move event-log segments whose events are all older
than that into <db>/archive/events, so the live log stops growing. Nothing
is deleted.`,
		examples: []string{"inbox archive --older-than 30d", "inbox archive --older-than 12h --status done --json"},
		new:      func() runner { return &archiveCmd{} }},

	{name: "stats", short: "counts by status and agent, sizes, oldest pending thread",
		long: `What an operator looks at first: how many threads are in each status, per
agent; the oldest pending thread; the store's size on disk and the event
log's size and last event id.`,
		examples: []string{"inbox stats", "inbox stats --json"},
		new:      func() runner { return &statsCmd{} }},

	{name: "skill", short: "print SKILL.md, the guide for agents using inbox",
		long: `Print the embedded SKILL.md: when and how an agent should use inbox, with
the worker loop and copyable commands. Install it where your agent runtime
looks for skills.`,
		examples: []string{"inbox skill > ~/.claude/skills/inbox/SKILL.md"},
		new:      func() runner { return &skillCmd{} }},

	{name: "completion", args: "bash|zsh|fish", short: "print a shell completion script",
		long: `Print a completion script for bash, zsh or fish: commands, their flags, and
the fixed values of --kind and --priority. Load it in your shell's start-up
file, or save it where your shell looks for completions.`,
		examples: []string{
			"source <(inbox completion bash)      # in ~/.bashrc",
			"source <(inbox completion zsh)       # in ~/.zshrc",
			"inbox completion fish > ~/.config/fish/completions/inbox.fish",
		},
		new: func() runner { return &completionCmd{} }},
}

func rootHelp(w io.Writer) {
	fmt.Fprint(w, `inbox — a durable coordination bus for AI agents on one machine.

Threads, messages, leases, read cursors and an event log live in a directory
(--db, else $INBOX_DB, else .agents/inbox). Every write is on disk before the
command exits, and any number of agents may use the store at once.

As a worker, the normal loop is:

  inbox fetch   --agent me --json                       # 1. what is waiting for me?
  inbox claim   --agent me --thread T --json            # 2. own one thread (lease + token)
  inbox update  --agent me --thread T --status in_progress --summary "..."
  inbox update  --agent me --thread T --status blocked --summary "what is missing"
  inbox wait-reply --agent me --thread T --timeout-seconds 1800   # 3. block until the answer lands
  inbox done    --agent me --thread T --summary "result"   (or: inbox fail)

fetch never grants ownership; only claim does. Work only while you hold the
lease, renew it for long work, and never sleep-poll: wait-reply wakes you.
As a leader: send work, list and show threads, reply to blocked workers,
cancel what is no longer needed.

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
	fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsagesWrapped(100))
	if len(c.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	fmt.Fprintf(w, "\nExit codes: 0 ok · 10 nothing to do · 20 lease conflict · 30 invalid · 40 not found · 50 storage\n")
}
