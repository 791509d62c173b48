package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/teamfiles"
)

var fsckCommand = &command{
	name: "fsck", short: "check the store's invariants; --repair fixes what a crash left",
	long: `Check every invariant the store promises: event-log lines whole, checksummed
and in increasing order; each thread's header agreeing with its messages;
each message having its event; lease files agreeing with their threads; the
index agreeing with the headers; no stray temp files or stale records.
Exit 0 when clean; otherwise exit 50 and list the findings.

--repair fixes what a crash can leave half-done (cuts a torn log tail,
appends missing events, removes uncommitted leftovers, rewrites lease
files, fixes the index) while holding every lock of the store, so writers
wait for it. It exits 0 when everything found was repaired.

--team-dir DIR and --claude-teams=DIR (the daemon's flags) also compare the
team inbox files with the store: a message delivered to a member but not in
its file, one in it twice, a line or entry others wrote that is not in the
store yet. --repair writes the missing, removes the extra copies and takes
in what was not. Run it while no daemon bridges the same files.`,
	examples: []string{"inbox fsck", "inbox fsck --repair --json", "inbox fsck --team-dir .agents/teams --claude-teams --repair   # and ~/.claude/teams"},
	new:      func() runner { return &fsckCmd{} },
}

type fsckCmd struct {
	repair               bool
	teamDir, claudeTeams string
}

func (r *fsckCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.BoolVar(&r.repair, "repair", false, "fix what a crash left half-done (locks the store while it runs)")
	fs.StringVar(&r.teamDir, "team-dir", "", "also check seed 002's JSONL member inboxes under this directory")
	fs.StringVar(&r.claudeTeams, "claude-teams", "", "also check Claude Code's team inboxes under --claude-teams DIR or --claude-teams=DIR (alone: ~/.claude/teams)")
	fs.Lookup("claude-teams").NoOptDefVal = "~/.claude/teams"
	c.agentFlag("the bridge's member name in Claude Code teams (default inbox)")
}

func (r *fsckCmd) run(c *call) (*result, error) {
	if err := optionalDir(c, "claude-teams", &r.claudeTeams); err != nil {
		return nil, err
	}
	c.recoverStore = true
	s, err := c.openNoArgs()
	if err != nil {
		return nil, err
	}
	rep, err := s.Fsck(c.ctx, r.repair)
	if err != nil {
		return nil, err
	}
	for _, b := range []struct {
		flag, dir string
		check     func(context.Context, teamfiles.Config, bool) ([]inbox.Finding, error)
	}{{"team-dir", r.teamDir, teamfiles.CheckJSONL}, {"claude-teams", r.claudeTeams, teamfiles.CheckClaude}} {
		if b.dir == "" {
			continue
		}
		dir, err := expandHome(b.flag, b.dir)
		if err != nil {
			return nil, err
		}
		agent := ""
		if c.g.agentSet {
			agent = c.g.agent
		}
		fs, err := b.check(c.ctx, teamfiles.Config{Bus: s, Dir: dir, Agent: agent}, r.repair)
		if err != nil {
			return nil, inbox.Storage(err, "check the team files under %s", dir)
		}
		rep.Findings = append(rep.Findings, fs...)
	}
	res := &result{}
	clean := rep.Clean()
	repaired := 0
	for _, f := range rep.Findings {
		if f.Repaired {
			repaired++
		}
	}
	res.set("clean", clean).set("threads", rep.Threads).set("messages", rep.Messages).set("events", rep.Events).
		set("findings", rep.Findings).set("repaired", repaired)
	if !clean {
		res.exit, res.failed = exitStorage, true
	}
	res.human = func(w io.Writer) {
		for _, f := range rep.Findings {
			state := "FOUND   "
			if f.Repaired {
				state = "REPAIRED"
			}
			where := f.ThreadID
			if where == "" {
				where = f.Path
			}
			fmt.Fprintf(w, "%s %-24s %s: %s\n", state, f.Check, where, f.Detail)
		}
		verdict := "clean"
		switch {
		case !clean:
			verdict = fmt.Sprintf("%d problems (run inbox fsck --repair)", len(rep.Findings)-repaired)
		case repaired > 0:
			verdict = fmt.Sprintf("clean after %d repairs", repaired)
		}
		fmt.Fprintf(w, "checked %d threads, %d messages, %d events: %s\n", rep.Threads, rep.Messages, rep.Events, verdict)
	}
	return res, nil
}

var reindexCommand = &command{
	name: "reindex", short: "rebuild the index from the thread files",
	long: `Rebuild the index that fetch and list read (derived data) from the thread
headers alone. Safe at any time; writers wait while it runs.`,
	examples: []string{"inbox reindex"},
	new:      func() runner { return &reindexCmd{} },
}

type reindexCmd struct{}

func (r *reindexCmd) flags(fs *pflag.FlagSet, c *call) {}

func (r *reindexCmd) run(c *call) (*result, error) {
	s, err := c.openNoArgs()
	if err != nil {
		return nil, err
	}
	n, err := s.Reindex(c.ctx)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("threads", n)
	res.human = func(w io.Writer) { fmt.Fprintf(w, "rebuilt the index of %d threads\n", n) }
	return res, nil
}

var archiveCommand = &command{
	name: "archive", short: "move old finished threads out of the live tree",
	long: `Move threads in a terminal status (--status, default done,failed,cancelled)
last updated longer ago than --older-than into <db>/archive, where
"inbox show" still reads them (read-only) but fetch, list and the index no
longer see them; also move event-log segments whose events are all older
than that into <db>/archive/events, so the live log stops growing. Nothing
is deleted.`,
	examples: []string{"inbox archive --older-than 30d", "inbox archive --older-than 12h --status done --json"},
	new:      func() runner { return &archiveCmd{} },
}

type archiveCmd struct {
	olderThan string
	statuses  []string
}

func (r *archiveCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.olderThan, "older-than", "", "archive threads last updated longer ago than this: 30d, 12h, 90m (required)")
	fs.StringSliceVar(&r.statuses, "status", nil, "terminal statuses to archive (default done,failed,cancelled)")
}

// parseAge reads a duration with an optional day unit: 30d, 36h, 1d12h.
func parseAge(s string) (time.Duration, error) {
	var days float64
	if i := strings.Index(s, "d"); i >= 0 {
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, err
		}
		days, s = n, s[i+1:]
	}
	d := time.Duration(days * 24 * float64(time.Hour))
	if s != "" {
		rest, err := time.ParseDuration(s)
		if err != nil {
			return 0, err
		}
		d += rest
	}
	return d, nil
}

func (r *archiveCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	if r.olderThan == "" {
		return nil, usagef("older-than", "--older-than is required (e.g. --older-than 30d)")
	}
	age, err := parseAge(r.olderThan)
	if err != nil || age < 0 {
		return nil, usagef("older-than", "--older-than %q is not a duration like 30d, 12h or 90m", r.olderThan)
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	out, err := s.Archive(c.ctx, age, r.statuses)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("cutoff", out.Cutoff).set("archived_threads", out.Threads).set("archived_segments", out.Segments)
	res.human = func(w io.Writer) {
		fmt.Fprintf(w, "archived %d threads and %d event-log segments last changed before %s\n",
			len(out.Threads), len(out.Segments), shortTime(out.Cutoff))
	}
	return res, nil
}

var statsCommand = &command{
	name: "stats", short: "counts by status and agent, sizes, oldest pending thread",
	long: `What an operator looks at first: how many threads are in each status, per
agent; the oldest pending thread; the store's size on disk and the event
log's size and last event id.`,
	examples: []string{"inbox stats", "inbox stats --json"},
	new:      func() runner { return &statsCmd{} },
}

type statsCmd struct{}

func (r *statsCmd) flags(fs *pflag.FlagSet, c *call) {}

func (r *statsCmd) run(c *call) (*result, error) {
	s, err := c.openNoArgs()
	if err != nil {
		return nil, err
	}
	st, err := s.Stats(c.ctx)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("threads", st.Threads).set("by_status", st.ByStatus).set("by_agent", st.ByAgent).
		set("archived_threads", st.ArchivedThreads).set("store_bytes", st.StoreBytes).
		set("event_log_bytes", st.EventLogBytes).set("event_log_segments", st.EventSegments).
		set("last_event_id", st.LastEventID).set("oldest_pending", st.OldestPending).set("mail_threads", st.MailThreads)
	res.human = func(w io.Writer) {
		fmt.Fprintf(w, "threads: %d live, %d archived, and %d of mail; store %s on disk; event log %s in %d segments, last event %d\n",
			st.Threads, st.ArchivedThreads, st.MailThreads, bytesHuman(st.StoreBytes), bytesHuman(st.EventLogBytes), st.EventSegments, st.LastEventID)
		if st.OldestPending != nil {
			fmt.Fprintf(w, "oldest pending: %s for %s since %s: %s\n", st.OldestPending.ThreadID, st.OldestPending.AssignedTo,
				shortTime(st.OldestPending.CreatedAt), oneLine(st.OldestPending.Subject, 50))
		}
		fmt.Fprintln(w)
		header := append([]string{"AGENT"}, inbox.Statuses...)
		var rows [][]string
		total := []string{"(all)"}
		for _, stat := range inbox.Statuses {
			total = append(total, strconv.Itoa(st.ByStatus[stat]))
		}
		rows = append(rows, total)
		agents := make([]string, 0, len(st.ByAgent))
		for a := range st.ByAgent {
			agents = append(agents, a)
		}
		sort.Strings(agents)
		for _, a := range agents {
			row := []string{a}
			for _, stat := range inbox.Statuses {
				row = append(row, strconv.Itoa(st.ByAgent[a][stat]))
			}
			rows = append(rows, row)
		}
		table(w, header, rows)
	}
	return res, nil
}

func bytesHuman(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
