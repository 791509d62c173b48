package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

// DefaultWaitSeconds bounds wait-reply and watch when --timeout-seconds is
// not given.
const defaultWaitSeconds = 600

// blockingContext is the invocation's context (call.ctx) for a command
// that runs until it is stopped (the daemon, the queue runner): SIGINT or
// SIGTERM, or for a call the MCP server makes the end of its request,
// cancels it.
func (c *call) blockingContext() (context.Context, context.CancelFunc) {
	return context.WithCancel(c.ctx)
}

// interruption records the signal, if any, that ended a blocking
// command's wait: SIGINT or SIGTERM is reported as an interruption (exit
// 130 or 143), never as a timeout (SPEC §7 Interrupts).
type interruption struct {
	mu  sync.Mutex
	sig syscall.Signal
}

// signal is the signal that ended the wait, or 0 when none did.
func (in *interruption) signal() syscall.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sig
}

// invocationContext is the context of one command (call.ctx): the first
// SIGINT or SIGTERM cancels it and is recorded in the interruption, so
// that the command reports it (exitCode maps the context.Canceled it
// returns to 130 or 143); a second one ends the process at once with its
// exit code, for a command that does not return. The stop function
// restores the signals' default behaviour. A call the MCP server makes
// has no signals: its context ends with the request.
func (e *env) invocationContext() (context.Context, func(), *interruption) {
	in := &interruption{}
	if e.ctx != nil {
		ctx, cancel := context.WithCancel(e.ctx)
		return ctx, cancel, in
	}
	c := &signalContext{Context: context.Background(), e: e, in: in}
	return c, c.stop, in
}

// signalContext is a command's context, cancelled by a signal. It
// listens for signals only once something asks for its Done channel: a
// wait that blocks (a contended lock, wait-reply, a NATS round trip) or
// a context derived from it. signal.Notify starts a goroutine, and with
// it an OS thread, that cost a command that never blocks about 0.8 ms on
// this machine (bench/abtime, show: 7.47 ms with it, 6.70 ms without);
// a signal that arrives before anything waits ends such a command as it
// always did, by the signal's default action.
type signalContext struct {
	context.Context // Background: no deadline, no values
	e               *env
	in              *interruption

	mu      sync.Mutex
	done    chan struct{}
	err     error
	stopped chan struct{} // closed by stop, once listening
	ended   bool          // stop was called
}

func (c *signalContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if !c.ended {
			c.listen()
		}
	}
	return c.done
}

func (c *signalContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// listen starts waiting for SIGINT and SIGTERM; c.mu is held.
func (c *signalContext) listen() {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	c.stopped = make(chan struct{})
	stopped := c.stopped
	go func() {
		defer signal.Stop(ch)
		var first os.Signal
		select {
		case first = <-ch:
		case <-stopped:
			return
		}
		c.in.mu.Lock()
		c.in.sig, _ = first.(syscall.Signal)
		c.in.mu.Unlock()
		c.cancel()
		select {
		case again := <-ch:
			sig, _ := again.(syscall.Signal)
			fmt.Fprintf(c.e.stderr, "inbox: interrupted again (%s): exiting now\n", signalName(sig))
			os.Exit(interruptExit(sig))
		case <-stopped:
		}
	}()
}

func (c *signalContext) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = context.Canceled
		close(c.done)
	}
}

// stop ends the listening, if it began; the signals act by default again.
func (c *signalContext) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ended {
		c.ended = true
		if c.stopped != nil {
			close(c.stopped)
		}
	}
}

// waitContext is the invocation's context for the commands that wait for
// something (wait-reply, watch, receive, events --follow), with the
// interruption that says which signal, if any, ended the wait.
func (c *call) waitContext() (context.Context, func(), *interruption) {
	ctx, cancel := context.WithCancel(c.ctx)
	return ctx, cancel, c.in
}

// interrupted reports whether the signal in in ended a wait that returned
// err: nothing found, or the backend's own cancellation error.
func interrupted(in *interruption, err error) bool {
	return in.signal() != 0 && (err == nil || errors.Is(err, context.Canceled))
}

// openWait reads --timeout-seconds (given seconds), then opens the store:
// how wait-reply and watch start their wait.
func (c *call) openWait(seconds float64) (inbox.Bus, time.Duration, error) {
	timeout, err := waitDuration(seconds)
	if err != nil {
		return nil, 0, err
	}
	s, err := c.open()
	if err != nil {
		return nil, 0, err
	}
	return s, timeout, nil
}

// wokeResult starts the answer of a wait-reply or watch: "woke" and the
// cursor; when nothing woke it, exit 10 and, for people, "inbox: nothing
// within <seconds>s" on stderr with the cursor to continue from.
func (c *call) wokeResult(w *inbox.WaitResult, nothing string, seconds float64) *result {
	res := &result{}
	res.set("woke", w.Woke).set("next_event_id", w.NextEventID)
	if !w.Woke {
		res.exit = exitNoWork
		res.human = func(io.Writer) {
			fmt.Fprintf(c.env.stderr, "inbox: %s within %gs (continue with --after-event %d)\n", nothing, seconds, w.NextEventID)
		}
	}
	return res
}

// waitOptions are the options of a command's wait: no timeout when
// timeout is 0, polling when INBOX_POLL=1, a notice when the watcher
// falls back to polling, and an early exit once the call is cancelled.
func (c *call) waitOptions(timeout time.Duration) inbox.WaitOptions {
	return inbox.WaitOptions{Timeout: timeout, ForcePoll: c.forcePoll(), OnFallback: c.fallbackNotice(), ExitSoon: true}
}

// waitInterrupted is the answer of a wait-reply or watch that a signal
// ended before it woke, with the cursor to continue from (the wait's, else
// after), or nil when the wait was not interrupted.
func (c *call) waitInterrupted(in *interruption, w *inbox.WaitResult, err error, after int64, what string) *result {
	if (w != nil && w.Woke) || !interrupted(in, err) {
		return nil
	}
	next := after
	if w != nil {
		next = w.NextEventID
	}
	return c.interruptedResult(in, next, what)
}

// interruptedResult is the answer of a wait that a signal ended (SPEC §7):
// exit 130 (SIGINT) or 143 (SIGTERM), and in JSON "woke":false,
// "interrupted":true, the cursor to continue from when the wait has one
// (next >= 0) and an error of code "interrupted". People get the line
// "inbox: interrupted (SIGINT) <what>" on stderr.
func (c *call) interruptedResult(in *interruption, next int64, what string) *result {
	sig := in.signal()
	msg := fmt.Sprintf("interrupted (%s) %s", signalName(sig), what)
	res := &result{exit: interruptExit(sig), failed: true}
	res.set("woke", false).set("interrupted", true)
	if next >= 0 {
		res.set("next_event_id", next)
		msg += fmt.Sprintf(" (continue with --after-event %d)", next)
	}
	res.set("error", map[string]string{"code": "interrupted", "message": msg})
	res.human = func(io.Writer) { fmt.Fprintf(c.env.stderr, "inbox: %s\n", msg) }
	return res
}

// signalName is SIGINT or SIGTERM.
func signalName(sig syscall.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// splitAlternatives accepts the seed's notation for a set of kinds or
// types, "answer|control|result", beside pflag's commas: each value is
// split at "|" and trimmed of spaces. Each one must pass check (the rule
// of package inbox for field); a refused one's error adds how to separate
// them, since "answer;control" or "answer control" is most often a set
// written with the wrong separator.
func splitAlternatives(field string, vals []string, check func(field, v string) error) ([]string, error) {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, "|") {
			p = strings.TrimSpace(p)
			if err := check(field, p); err != nil {
				var ie *inbox.Error
				if errors.As(err, &ie) {
					e := *ie
					e.Rule += fmt.Sprintf("; separate %s with commas or | (e.g. %s)", field, separatorExample[field])
					return nil, &e
				}
				return nil, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// separatorExample is a valid set for each field splitAlternatives reads.
var separatorExample = map[string]string{"kinds": "answer|control", "types": "task_status_response|message"}

func waitDuration(secs float64) (time.Duration, error) {
	if secs < 0 || math.IsNaN(secs) || secs > 365*24*3600 {
		return 0, usagef("timeout-seconds", "--timeout-seconds %v is out of range: give 0 (check once) up to a year", secs)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// fallbackNotice returns an OnFallback that says once on stderr that the
// wait polls.
func (c *call) fallbackNotice() func(error) {
	var once sync.Once
	return func(reason error) {
		once.Do(func() {
			fmt.Fprintf(c.env.stderr, "inbox: warning: file notifications unavailable (%v); polling every 100ms\n", reason)
		})
	}
}

func (c *call) forcePoll() bool { return c.env.getenv("INBOX_POLL") == "1" }

var waitReplyCommand = &command{
	name: "wait-reply", short: "block until an answer lands in a thread",
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
ID. With no cursor and no agent, the wait is for a message later than the
thread's last question or blocked update (so the answer to it counts even
if it landed first), or, on a thread with no question, later than its
newest message when the call starts. The output's next_event_id is the
cursor for the next wait. On a thread that is already done, failed or
cancelled it returns at once with the message that ended it. On timeout it
exits 10 with "woke":false; SIGINT (Ctrl-C) or SIGTERM ends it at once with
130 or 143 and "interrupted":true.

Your wait keeps your lease: when --agent holds the thread's lease (with the
token --lease-token gives, if given), the waiting process renews it, for
the length it was claimed or last renewed with, whenever half of it is
left, so an answer after a wait longer than the lease finds you still
holding the thread. The renewing stops when the wait returns or the
process dies, so a dead worker's lease still runs out. A wait without an
agent, or by another agent, renews nothing.

Request/response (seed 002): --request-id R waits for the response to the
request that carries R (send or reply --request-id R, or --request): any
later message of the thread carrying R, of any kind, found at once if it
came before the wait. --types task_status_response,… waits for typed
messages of those types. --kinds and --types also take the seed's
answer|control|result notation.

wait-reply waits on one thread for messages; "inbox watch" waits on all of an
agent's threads for new threads and status changes.`,
	examples: []string{
		"inbox wait-reply --agent backend-worker --thread thr_01... --timeout-seconds 1800 --json",
		"inbox wait-reply --thread thr_01... --after-event 51 --kinds answer,control --json",
		"inbox wait-reply --thread thr_01... --request-id req-98765 --timeout-seconds 300 --json",
	},
	new: func() runner { return &waitReplyCmd{} },
}

type waitReplyCmd struct {
	thread, afterMessage string
	afterEvent, token    int64
	kinds, types         []string
	requestID            string
	timeout              float64
}

func (r *waitReplyCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("wait after this agent's read cursor and move it to the message returned (env INBOX_AGENT)")
	fs.StringVar(&r.thread, "thread", "", "thread to wait in (required)")
	fs.StringVar(&r.afterMessage, "after-message", "", "wait for a message later than this message id")
	fs.Int64Var(&r.afterEvent, "after-event", 0, "wait for a message whose event id is greater than this (from next_event_id)")
	fs.StringSliceVar(&r.kinds, "kinds", nil, "message kinds that count, comma- or |-separated (default answer,control,result; any with --types or --request-id)")
	fs.StringSliceVar(&r.types, "types", nil, "message types that count, comma- or |-separated (seed 002's task_status_response, …)")
	fs.StringVar(&r.requestID, "request-id", "", "wait for the response to the request carrying this id")
	fs.Float64Var(&r.timeout, "timeout-seconds", defaultWaitSeconds, "give up after this long (exit 10); 0 checks once")
	fs.Int64Var(&r.token, "lease-token", 0, "as the lease holder (--agent), keep the lease only while it is this token's")
}

func (r *waitReplyCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	if r.thread == "" {
		return nil, usagef("thread", "--thread is required")
	}
	if r.token != 0 && c.g.agent == "" {
		return nil, usagef("lease-token", "--lease-token names the holder's lease the wait keeps: give the holder as --agent (or INBOX_AGENT) too")
	}
	kinds, err := splitAlternatives("kinds", r.kinds, func(f, k string) error { return inbox.ValidateKind(f, k, inbox.Kinds) })
	if err != nil {
		return nil, err
	}
	types, err := splitAlternatives("types", r.types, inbox.ValidateType)
	if err != nil {
		return nil, err
	}
	s, timeout, err := c.openWait(r.timeout)
	if err != nil {
		return nil, err
	}
	ctx, stop, in := c.waitContext()
	defer stop()
	cur := inbox.ReplyCursor{AfterMessage: r.afterMessage, AfterEvent: r.afterEvent, HasEvent: c.fs.Changed("after-event"),
		Agent: c.g.agent, LeaseToken: r.token}
	f := inbox.ReplyFilter{Kinds: kinds, Types: types, RequestID: r.requestID}
	// The wait graph shows what a blocked agent waits on, recorded once a
	// first look (Timeout 0) found nothing, so that a reply already there
	// costs nothing more. With an agent the cursor is its read cursor or
	// one given, the same for both looks.
	opt := c.waitOptions(timeout)
	record := timeout > 0 && c.g.agent != ""
	if record {
		opt.Timeout = 0
	}
	w, err := s.WaitReply(ctx, r.thread, cur, f, opt)
	if record && err == nil && !w.Woke && ctx.Err() == nil {
		defer s.WaitingOn(ctx, inbox.WaitInfo{Agent: c.g.agent, Reason: inbox.WaitForReply, ThreadID: r.thread})()
		opt.Timeout = timeout
		w, err = s.WaitReply(ctx, r.thread, cur, f, opt)
	}
	if res := c.waitInterrupted(in, w, err, r.afterEvent, "before a reply came in "+r.thread); res != nil {
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	res := c.wokeResult(w, "no reply in "+r.thread, r.timeout)
	if !w.Woke {
		return res, nil
	}
	res.set("message", w.Message)
	res.human = func(wr io.Writer) {
		m := w.Message
		fmt.Fprintf(wr, "%s from %s in %s: %s\n", m.Kind, m.FromAgent, m.ThreadID, inbox.Printable(m.Summary))
		if m.Body != "" && m.Body != m.Summary {
			fmt.Fprintln(wr, strings.TrimRight(m.Body, "\n"))
		}
		if p := string(m.PayloadJSON); p != "{}" {
			fmt.Fprintf(wr, "payload: %s\n", inbox.Printable(p))
		}
		fmt.Fprintf(wr, "(next: --after-event %d)\n", w.NextEventID)
	}
	return res, nil
}

var watchCommand = &command{
	name: "watch", short: "block until an agent gets a new thread or a status change",
	long: `Block until something happens to --agent's threads after the call starts (or
after --after-event N): a new thread assigned to it, or a thread it is
assigned to or created changing status (only the statuses in --status, if
given). Prints the event and the thread, and next_event_id to continue from.
Exit 10 with "woke":false on timeout; 130 or 143 with "interrupted":true
when SIGINT or SIGTERM ends the wait.

Use watch as a leader waiting for results (--status done,failed,blocked) or as
an idle worker waiting for work (--status pending); use wait-reply to wait for
messages inside one thread.`,
	examples: []string{
		"inbox watch --agent backend-worker --status pending --timeout-seconds 600 --json",
		"inbox watch --agent leader --status done,failed,blocked --json",
	},
	new: func() runner { return &watchCmd{} },
}

type watchCmd struct {
	statuses   []string
	afterEvent int64
	timeout    float64
}

func (r *watchCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("whose threads to watch (env INBOX_AGENT)")
	fs.StringSliceVar(&r.statuses, "status", nil, "statuses that count, comma-separated (default any)")
	fs.Int64Var(&r.afterEvent, "after-event", 0, "count only events after this id (default: from now)")
	fs.Float64Var(&r.timeout, "timeout-seconds", defaultWaitSeconds, "give up after this long (exit 10); 0 checks once")
}

func (r *watchCmd) run(c *call) (*result, error) {
	agent, err := c.agentNoArgs()
	if err != nil {
		return nil, err
	}
	s, timeout, err := c.openWait(r.timeout)
	if err != nil {
		return nil, err
	}
	ctx, stop, in := c.waitContext()
	defer stop()
	var after *int64
	if c.fs.Changed("after-event") {
		after = &r.afterEvent
	}
	w, err := s.Watch(ctx, agent, r.statuses, after, c.waitOptions(timeout))
	if res := c.waitInterrupted(in, w, err, r.afterEvent, "before anything new for "+agent); res != nil {
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	res := c.wokeResult(w, "nothing new for "+agent, r.timeout)
	if !w.Woke {
		return res, nil
	}
	res.set("event", w.Event).set("thread", w.Thread)
	res.human = func(wr io.Writer) {
		e := w.Event
		fmt.Fprintf(wr, "%s: %s is %s (%s)\n", e.EventType, e.ThreadID, e.Status, inbox.Printable(w.Thread.Subject))
		fmt.Fprintf(wr, "(next: --after-event %d)\n", w.NextEventID)
	}
	return res, nil
}

var eventsCommand = &command{
	name: "events", short: "print or follow the event log",
	long: `Print the store's event log: every state change, in order, with its
monotonic event_id. --thread keeps one thread's events, --after-event starts
after a cursor. --limit N prints the newest N events (oldest first), or,
with --after-event, the first N after it: page on with the output's
next_event_id. --follow keeps streaming new events as they are appended
until interrupted; with --json each event is then one JSON object per line,
for leaders and orchestrators that tail the bus. SIGINT or SIGTERM ends the
stream with 130 or 143; with --json its last line is then
{"ok":false,"command":"events","woke":false,"interrupted":true,"next_event_id":N,…}.`,
	examples: []string{
		"inbox events --thread thr_01...",
		"inbox events --after-event 120 --follow --json",
	},
	new: func() runner { return &eventsCmd{} },
}

type eventsCmd struct {
	thread     string
	afterEvent int64
	follow     bool
	limit      int
}

func (r *eventsCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.thread, "thread", "", "only events of this thread")
	fs.Int64Var(&r.afterEvent, "after-event", 0, "only events with a greater id")
	fs.BoolVar(&r.follow, "follow", false, "keep printing new events as they are appended (stop with Ctrl-C)")
	fs.IntVar(&r.limit, "limit", 0, "print the newest N events; with --after-event the first N after it; with --follow stop after N (0: no limit)")
}

func (r *eventsCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	if r.afterEvent < 0 || r.limit < 0 {
		return nil, usagef("after-event", "--after-event and --limit must be 0 or more")
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	if r.thread != "" {
		if _, err := s.Thread(c.ctx, r.thread); err != nil {
			return nil, err
		}
	}
	if r.follow {
		return r.stream(c, s)
	}
	evs := []*inbox.Event{}
	next := r.afterEvent
	// Without a cursor, --limit keeps the newest events: the log is read
	// to its end, and the kept events are cut back to the newest limit
	// whenever they reach twice as many.
	newest := r.limit > 0 && !c.fs.Changed("after-event")
	err = s.Events(c.ctx, r.afterEvent, func(ev *inbox.Event) bool {
		next = ev.EventID
		if r.thread == "" || ev.ThreadID == r.thread {
			if newest && len(evs) == 2*r.limit {
				evs = append(evs[:0], evs[r.limit:]...)
			}
			evs = append(evs, ev)
		}
		return newest || r.limit == 0 || len(evs) < r.limit
	})
	if newest && len(evs) > r.limit {
		evs = evs[len(evs)-r.limit:]
	}
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("events", evs).set("next_event_id", next)
	res.human = func(w io.Writer) {
		for _, ev := range evs {
			fmt.Fprintln(w, eventLine(ev))
		}
	}
	return res, nil
}

// stream prints events as they come: one JSON object per line with --json.
// Its result is nil (the stream was the output) unless a signal ended it:
// then the interruption's answer, after the events, is the last line.
func (r *eventsCmd) stream(c *call, s inbox.Bus) (*result, error) {
	ctx, stop, in := c.waitContext()
	defer stop()
	n := 0
	next := r.afterEvent
	opt := c.waitOptions(0)
	human := newHumanWriter(c.env.stdout)
	err := s.Follow(ctx, r.afterEvent, r.thread, opt, func(ev *inbox.Event) bool {
		if c.g.json {
			b, _ := encodeJSON(ev)
			c.env.stdout.Write(append(b, '\n'))
		} else {
			fmt.Fprintln(human, eventLine(ev))
			human.Flush()
		}
		next = ev.EventID
		n++
		return r.limit == 0 || n < r.limit
	})
	if (r.limit == 0 || n < r.limit) && interrupted(in, err) {
		return c.interruptedResult(in, next, "while following events"), nil
	}
	return nil, err
}

func eventLine(ev *inbox.Event) string {
	kind := ""
	if ev.Kind != "" {
		kind = " [" + ev.Kind + "]"
	}
	return fmt.Sprintf("%6d  %s  %-16s %s  %-11s %s%s  %s", ev.EventID, shortTime(ev.CreatedAt), ev.EventType,
		ev.ThreadID, ev.Status, ev.Agent, kind, oneLine(ev.Summary, 60))
}
