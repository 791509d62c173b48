package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// The hook contracts (SPEC §13), as each tool documents them:
//
// Claude Code (https://code.claude.com/docs/en/hooks): JSON on stdin with
// session_id, transcript_path, cwd, hook_event_name; Stop and SubagentStop
// add stop_hook_active. A stop is blocked by printing
// {"decision":"block","reason":…} and exiting 0 (TeammateIdle the same);
// UserPromptSubmit and SessionStart add context with
// {"hookSpecificOutput":{"hookEventName":…,"additionalContext":…}}.
// Exit 2 would block a prompt and erase it, so inbox never uses it.
//
// Codex CLI (https://developers.openai.com/codex/hooks): hooks.json beside
// config.toml (feature flag codex_hooks); Stop, UserPromptSubmit and
// SessionStart take Claude Code's input fields and output shapes.
//
// Gemini CLI (https://geminicli.com/docs/hooks/reference): settings.json
// "hooks"; stdin adds timestamp; AfterAgent (prompt, prompt_response,
// stop_hook_active) rejects a response with {"decision":"deny","reason":…},
// whose reason becomes the next prompt; BeforeAgent and SessionStart take
// {"hookSpecificOutput":{"hookEventName":…,"additionalContext":…}}; stdout
// must hold nothing but that JSON.

var hookCommand = &command{
	name: "hook", args: "claude|codex|gemini EVENT | install|uninstall claude|codex|gemini",
	short: "answer Claude Code, Codex and Gemini CLI hooks (stop while work is open? new mail?)",
	long: `The command an agent's own runtime runs at its hooks, so that the agent is
told about its work on the bus without polling:

  Stop events (Claude Code Stop, SubagentStop, TeammateIdle; Codex Stop;
  Gemini AfterAgent): the stop is blocked, with a reason naming the exact
  commands to run, while the agent holds an unfinished claimed thread, has
  mail it has not collected, or owes an acknowledgment. Never twice for the
  same state: a session's stop is blocked again only for something new
  since its last block (new mail, a new claim, a new acknowledgment owed),
  stop_hook_active or not (a per-session mark in the store), so an agent
  is never stuck in a loop, nagged about what it was told, or let go past
  new work.
  Prompt and session-start events (UserPromptSubmit, SessionStart; Gemini
  BeforeAgent, SessionStart): the unread mail, the threads it holds, the
  blocked threads waiting on it and the acknowledgments it owes are added
  as context (at most 8 KB). Nothing is marked read.

It reads the hook's JSON on stdin and answers in that tool's contract. The
agent is --agent or INBOX_AGENT, the store --db or INBOX_DB. It always exits
0 and fails open: a broken store or bad input allows the stop, with a note
on stderr.

  inbox hook install claude|codex|gemini [--project] [--dry-run]
  inbox hook uninstall claude|codex|gemini [--project] [--dry-run]

merge inbox's entries into the tool's settings (~/.claude/settings.json,
~/.codex/hooks.json, ~/.gemini/settings.json; with --project, the ones in
the current directory), keeping everything else byte for byte, writing
atomically with a .bak backup; --dry-run prints the change instead.
Each hook runs inbox by its absolute path, so it works whatever the
tool's PATH holds. --agent, and the store (--db, else INBOX_DB as install
sees it), are written into the hook's command line (the store made
absolute for a user-level install; kept as given with --project, whose
hooks run at the project's root); otherwise the hooks read INBOX_AGENT
and INBOX_DB from the tool's environment. The commands a hook names carry
the same --agent and --db (absolute), so they work pasted into the
agent's shell from any directory.`,
	examples: []string{
		"inbox hook install claude --agent backend-dev",
		"inbox hook install gemini --project --dry-run",
		`echo '{"session_id":"s1","hook_event_name":"Stop","stop_hook_active":false}' | INBOX_AGENT=backend-dev inbox hook claude Stop`,
	},
	new: func() runner { return &hookCmd{} },
}

type hookCmd struct {
	project, dryRun bool
}

func (r *hookCmd) flags(fs *pflag.FlagSet, c *call) {
	c.agentFlag("the agent the hooks are for (env INBOX_AGENT); install writes it into the hook commands")
	fs.BoolVar(&r.project, "project", false, "install into the current project's settings instead of the user's")
	fs.BoolVar(&r.dryRun, "dry-run", false, "print the change to the settings file, write nothing")
}

// hookEvents are the events inbox answers, per tool, and what each is.
var hookEvents = map[string]map[string]string{
	"claude": {"Stop": "stop", "SubagentStop": "stop", "TeammateIdle": "stop", "UserPromptSubmit": "context", "SessionStart": "context"},
	"codex":  {"Stop": "stop", "UserPromptSubmit": "context", "SessionStart": "context"},
	"gemini": {"AfterAgent": "stop", "BeforeAgent": "context", "SessionStart": "context"},
}

var hookTools = []string{"claude", "codex", "gemini"}

func (r *hookCmd) run(c *call) (*result, error) {
	if len(c.args) >= 1 && (c.args[0] == "install" || c.args[0] == "uninstall") {
		if len(c.args) != 2 || hookEvents[c.args[1]] == nil {
			return nil, usagef("", "inbox hook %s needs one of %s", c.args[0], strings.Join(hookTools, "|"))
		}
		return r.install(c, c.args[0] == "install", c.args[1])
	}
	// Answering a hook: whatever happens, exit 0 and allow (fail open).
	if len(c.args) != 2 || hookEvents[c.args[0]] == nil {
		fmt.Fprintf(c.env.stderr, "inbox hook: usage: inbox hook claude|codex|gemini EVENT (got %q); allowing\n", c.args)
		return &result{}, nil
	}
	tool, event := c.args[0], c.args[1]
	kind := hookEvents[tool][event]
	if kind == "" {
		fmt.Fprintf(c.env.stderr, "inbox hook: %s has no %s event inbox answers (it answers %s); allowing\n", tool, event, eventNames(tool))
		return &result{}, nil
	}
	out, err := r.answer(c, tool, event, kind)
	if err != nil {
		fmt.Fprintf(c.env.stderr, "inbox hook: %s; allowing\n", message(err))
		return &result{}, nil
	}
	if out != nil {
		c.env.stdout.Write(append(out, '\n'))
	}
	return &result{}, nil
}

func eventNames(tool string) string {
	var out []string
	for e := range hookEvents[tool] {
		out = append(out, e)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// hookInput is the part of a hook's stdin inbox reads.
type hookInput struct {
	SessionID      string `json:"session_id"`
	HookEventName  string `json:"hook_event_name"`
	StopHookActive bool   `json:"stop_hook_active"`
}

// decode reads the members inbox uses from a hook's stdin, without
// encoding/json's reflection (whose first use costs a process about as
// much as the rest of a stop that allows: every stop pays it).
func (in *hookInput) decode(data []byte) error {
	return jsonrec.Decode(data, func(d *jsonrec.Decoder) {
		d.Object(func(name []byte) {
			switch string(name) {
			case "session_id":
				d.Str(&in.SessionID)
			case "hook_event_name":
				d.Str(&in.HookEventName)
			case "stop_hook_active":
				d.Bool(&in.StopHookActive)
			default:
				d.Skip()
			}
		})
	})
}

// hookState is what the agent has open on the bus.
type hookState struct {
	held     []*inbox.Thread  // claimed, unfinished, lease live, held by the agent
	mail     []*inbox.Message // the newest uncollected, newest first
	mailN    int              // how many are uncollected
	owed     []*inbox.Message // acknowledgments it owes
	blocked  []*inbox.Thread  // threads it created that are blocked on it
	question map[string]*inbox.Message
}

func (st *hookState) empty() bool { return len(st.held)+st.mailN+len(st.owed) == 0 }

// stopMark is what a session's last blocked stop told the agent about,
// recorded in the store as the session's mark: the newest mail and owed
// acknowledgment (event ids) and how many of each there were, and the
// threads it held. A later stop blocks again only for something since:
// mail or an acknowledgment newer than those, more of them than there
// were (one that committed late, under an older event id), or a thread
// held that was not.
type stopMark struct {
	mail, ack   int64    // the newest mail and acknowledgment told about
	mailN, ackN int      // how many there were
	held        []string // the threads held, by heldKey
}

// stopMarkVersion starts every mark this code writes; a mark without it
// (an older inbox's fingerprint) reads as none: one more reminder.
const stopMarkVersion = "stop2"

// heldKey names a held thread in a mark, short enough for the 50 threads
// a stop reads to fit the store's limit whatever their ids.
func heldKey(tid string) string {
	sum := sha256.Sum256([]byte(tid))
	return hex.EncodeToString(sum[:6])
}

func (m stopMark) String() string {
	return fmt.Sprintf("%s m=%d n=%d a=%d k=%d t=%s", stopMarkVersion, m.mail, m.mailN, m.ack, m.ackN, strings.Join(m.held, ","))
}

// parseStopMark reads a mark String wrote; anything else is no mark.
func parseStopMark(s string) stopMark {
	f := strings.Split(s, " ")
	if len(f) != 6 || f[0] != stopMarkVersion {
		return stopMark{}
	}
	var n [4]int64
	for i, key := range []string{"m=", "n=", "a=", "k="} {
		v, ok := strings.CutPrefix(f[i+1], key)
		x, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return stopMark{}
		}
		n[i] = x
	}
	held, ok := strings.CutPrefix(f[5], "t=")
	if !ok {
		return stopMark{}
	}
	m := stopMark{mail: n[0], mailN: int(n[1]), ack: n[2], ackN: int(n[3])}
	if held != "" {
		m.held = strings.Split(held, ",")
	}
	return m
}

// newest is the highest event id among ms (0 when none).
func newest(ms []*inbox.Message) int64 {
	var id int64
	for _, m := range ms {
		id = max(id, m.EventID)
	}
	return id
}

// mark is what a stop blocked now tells the agent about.
func (st *hookState) mark(prev stopMark) stopMark {
	m := stopMark{mail: max(prev.mail, newest(st.mail)), mailN: st.mailN, ack: max(prev.ack, newest(st.owed)), ackN: len(st.owed)}
	for _, t := range st.held {
		m.held = append(m.held, heldKey(t.ThreadID))
	}
	return m
}

// news reports whether the state holds something the agent was not told
// about at the mark: new mail, a new acknowledgment owed, a new claim.
func (st *hookState) news(m stopMark) bool {
	if st.mailN > 0 && (st.mailN > m.mailN || newest(st.mail) > m.mail) {
		return true
	}
	if len(st.owed) > m.ackN || newest(st.owed) > m.ack {
		return true
	}
	for _, t := range st.held {
		if !slices.Contains(m.held, heldKey(t.ThreadID)) {
			return true
		}
	}
	return false
}

func (r *hookCmd) gather(ctx context.Context, s inbox.Bus, agent string, withContext bool) (*hookState, error) {
	st := &hookState{question: map[string]*inbox.Message{}}
	held, err := s.List(ctx, inbox.ListFilter{AssignedTo: agent, Statuses: []string{inbox.StatusClaimed, inbox.StatusInProgress, inbox.StatusBlocked}, Limit: 50})
	if err != nil {
		return nil, err
	}
	for _, t := range held {
		if !t.LeaseExpired {
			st.held = append(st.held, t)
		}
	}
	// Only the newest mail is read: the stop reason names the latest,
	// and the context has room for about hookMailShown summaries.
	shown := 1
	if withContext {
		shown = hookMailShown
	}
	n, items, err := s.MailPeek(ctx, agent, shown)
	if err != nil {
		return nil, err
	}
	st.mailN = n
	for _, it := range items {
		st.mail = append(st.mail, it.Message)
	}
	if st.owed, err = s.Unacknowledged(ctx, agent); err != nil {
		return nil, err
	}
	if withContext {
		if st.blocked, err = s.List(ctx, inbox.ListFilter{CreatedBy: agent, Statuses: []string{inbox.StatusBlocked}, Limit: 20}); err != nil {
			return nil, err
		}
		for _, t := range st.blocked {
			if _, m, err := s.LastMessage(ctx, t.ThreadID); err == nil {
				st.question[t.ThreadID] = m
			}
		}
	}
	return st, nil
}

const maxHookContext = 8 << 10

// hookMailShown is how many of the newest messages a hook reads.
const hookMailShown = 40

func (r *hookCmd) answer(c *call, tool, event, kind string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(c.env.stdin, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("read stdin: %w", err)
	}
	var in hookInput
	if len(bytes.TrimSpace(data)) > 0 {
		if err := in.decode(data); err != nil {
			return nil, fmt.Errorf("the hook's stdin is not JSON: %v", err)
		}
	}
	agent := c.g.agent
	if agent == "" {
		return nil, errors.New("no agent: set INBOX_AGENT (or --agent) in the hook's environment")
	}
	if err := inbox.ValidateAgent("agent", agent); err != nil {
		return nil, err
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	st, err := r.gather(c.ctx, s, agent, kind == "context")
	if err != nil {
		return nil, err
	}
	if kind == "stop" {
		if st.empty() {
			return nil, nil
		}
		// Blocked only for what this session was not told about at its
		// last block, stop_hook_active or not: an agent that goes on
		// because of a block and stops again unchanged is let go (no
		// loop), one that got new work meanwhile is not.
		var prev stopMark
		if mark, err := s.SessionMark(c.ctx, agent, in.SessionID); err == nil {
			prev = parseStopMark(mark)
		}
		if !st.news(prev) {
			return nil, nil
		}
		if err := s.SetSessionMark(c.ctx, agent, in.SessionID, st.mark(prev).String()); err != nil {
			return nil, err
		}
		decision := "block"
		if tool == "gemini" {
			decision = "deny"
		}
		return json.Marshal(map[string]string{"decision": decision, "reason": stopReason(newShellCmds(c, agent), st)})
	}
	text := contextText(newShellCmds(c, agent), st)
	if text == "" {
		return nil, nil
	}
	return json.Marshal(map[string]any{"hookSpecificOutput": map[string]string{"hookEventName": event, "additionalContext": text}})
}

// quote is s's first line, cut to 80 bytes, in quotes, for a hook's text.
func quote(s string) string { return "\"" + hookText(inbox.FirstLine(s), 80) + "\"" }

// hookText is s, a sender's text, as a hook's reason or context shows it:
// a tool hands that text to a person's terminal as well as to its model,
// so its control characters are escaped as every human view escapes them
// (inbox.Printable, SPEC §4), and it is cut to max bytes.
func hookText(s string, max int) string { return inbox.Shorten(inbox.Printable(s), max) }

// shellCmds words the commands a hook names so that each works pasted
// into the agent's shell as it is, from wherever it is: inbox as that
// shell finds it, the agent, and the store when the hook was given one
// (--db, which hook install writes from its --db or INBOX_DB), made
// absolute.
type shellCmds struct {
	bin, agent string
	db         string // " --db STORE", or nothing
}

func newShellCmds(c *call, agent string) shellCmds {
	sc := shellCmds{bin: "inbox", agent: agent}
	if _, err := exec.LookPath("inbox"); err != nil {
		if p, err := inboxBinary(); err == nil {
			sc.bin = shellQuote(p)
		}
	}
	if c.g.dbSet {
		db, err := absDB(c.g.db)
		if err != nil {
			db = c.g.db
		}
		sc.db = " --db " + shellQuote(db)
	}
	return sc
}

// as is `inbox SUB --agent A [--db D] ARGS`: SUB run as the agent.
func (sc shellCmds) as(sub, args string) string {
	return "`" + strings.TrimSpace(sc.bin+" "+sub+" --agent "+shellQuote(sc.agent)+sc.db+" "+args) + "`"
}

// run is `inbox SUB [--db D] ARGS`.
func (sc shellCmds) run(sub, args string) string {
	return "`" + strings.TrimSpace(sc.bin+" "+sub+sc.db+" "+args) + "`"
}

// stopReason names the exact commands that finish what is open.
func stopReason(sc shellCmds, st *hookState) string {
	var b strings.Builder
	agent := sc.agent
	fmt.Fprintf(&b, "Before you stop, you (%s) have open work on the inbox bus:\n", agent)
	for i, t := range st.held {
		if i == 5 {
			fmt.Fprintf(&b, "- and %d more threads: %s\n", len(st.held)-5, sc.run("list", "--assigned-to "+shellQuote(agent)))
			break
		}
		thread := "--thread " + t.ThreadID
		fmt.Fprintf(&b, "- you hold thread %s (%s) %s: finish it with %s (or %s, or %s); read it with %s\n",
			t.ThreadID, t.Status, quote(t.Subject), sc.as("done", thread+` --summary "..."`), sc.as("fail", thread+` --summary "..."`),
			sc.as("update", thread+` --status blocked --summary "..."`), sc.run("show", thread))
	}
	if n := st.mailN; n > 0 {
		last := st.mail[0]
		fmt.Fprintf(&b, "- %d message(s) wait in your mailbox (latest from %s: %s): read them with %s (or %s)\n",
			n, last.FromAgent, quote(last.Summary), sc.as("receive", ""), sc.as("check", ""))
	}
	for i, m := range st.owed {
		if i == 3 {
			fmt.Fprintf(&b, "- and %d more acknowledgments: %s\n", len(st.owed)-3, sc.as("mailbox", ""))
			break
		}
		fmt.Fprintf(&b, "- %s asked you to acknowledge %s %s: %s\n", m.FromAgent, m.MessageID, quote(m.Summary), sc.as("ack", "--message "+m.MessageID))
	}
	return strings.TrimRight(b.String(), "\n")
}

// contextText is what a prompt or session start learns, at most 8 KB.
func contextText(sc shellCmds, st *hookState) string {
	if st.empty() && len(st.blocked) == 0 {
		return ""
	}
	agent := sc.agent
	var lines []string
	lines = append(lines, fmt.Sprintf("inbox (you are %s):", agent))
	if st.mailN > 0 {
		lines = append(lines, fmt.Sprintf("Unread mail (%d, newest first; collect with %s):", st.mailN, sc.as("receive", "")))
		for _, m := range st.mail {
			kind := m.Kind
			if m.Type != "" {
				kind = m.Type
			}
			lines = append(lines, fmt.Sprintf("- from %s [%s] in %s: %s", m.FromAgent, kind, m.ThreadID, hookText(inbox.FirstLine(m.Summary), 200)))
		}
		if older := st.mailN - len(st.mail); older > 0 {
			lines = append(lines, fmt.Sprintf("- and %d older: %s", older, sc.as("mailbox", "")))
		}
	}
	if len(st.held) > 0 {
		lines = append(lines, "Threads you hold:")
		for _, t := range st.held {
			lines = append(lines, fmt.Sprintf("- %s (%s): %s", t.ThreadID, t.Status, hookText(t.Subject, 200)))
		}
	}
	if len(st.blocked) > 0 {
		lines = append(lines, fmt.Sprintf("Blocked threads waiting on you (answer with %s):", sc.run("reply", "--from "+shellQuote(agent)+" --thread ID --kind answer --summary ...")))
		for _, t := range st.blocked {
			q := ""
			if m := st.question[t.ThreadID]; m != nil {
				q = " — " + m.FromAgent + " asks: " + hookText(inbox.FirstLine(m.Summary), 200)
			}
			lines = append(lines, fmt.Sprintf("- %s: %s%s", t.ThreadID, hookText(t.Subject, 200), q))
		}
	}
	if len(st.owed) > 0 {
		lines = append(lines, "Acknowledgments you owe ("+sc.as("ack", "--message ID")+"):")
		for _, m := range st.owed {
			lines = append(lines, fmt.Sprintf("- %s from %s: %s", m.MessageID, m.FromAgent, hookText(inbox.FirstLine(m.Summary), 200)))
		}
	}
	more := fmt.Sprintf("… and more: %s, %s", sc.as("mailbox", ""), sc.run("list", "--assigned-to "+shellQuote(agent)))
	var b strings.Builder
	for i, l := range lines {
		if b.Len()+len(l)+1 > maxHookContext-len(more)-1 {
			b.WriteString(more)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}
