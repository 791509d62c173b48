package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/spf13/pflag"
)

var searchCommand = &command{
	name: "search", args: "QUERY", short: "find messages by the words they contain",
	long: `Find the messages whose subject, summary, body or payload text contain every
word of QUERY: case-insensitive, whole words ("postgres" does not find
"postgresql"); "quoted phrases" match as phrases, in order, inside one
field (the subject, the summary, the body, one payload key or value).
Results come newest first, each with its thread, sender and a snippet
around the match; --from, --to, --thread, --kind, --type and --since
narrow them. Exit 10 when nothing matches. Searches the live threads (not
the archive). A query is at most 64 words and 1,024 bytes.`,
	examples: []string{
		`inbox search postgres migration`,
		`inbox search '"users table"' --from backend-dev --since 2d --json`,
		`inbox search timeout --kind question --to leader`,
	},
	new: func() runner { return &searchCmd{} },
}

type searchCmd struct {
	from, to, thread, kind, typ, since string
	limit                              int
}

func (r *searchCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.from, "from", "", "only messages from this agent")
	fs.StringVar(&r.to, "to", "", "only messages delivered to this agent")
	fs.StringVar(&r.thread, "thread", "", "only messages of this thread")
	fs.StringVar(&r.kind, "kind", "", "only messages of this kind (task, progress, question, answer, result, control, event)")
	fs.StringVar(&r.typ, "type", "", "only messages of this seed-002 type (e.g. task_status_response)")
	fs.StringVar(&r.since, "since", "", "only messages created since then: a time (2026-11-26T10:00:00Z) or an age (90m, 12h, 2d)")
	fs.IntVar(&r.limit, "limit", inbox.DefaultSearchLimit, "at most this many messages")
}

func (r *searchCmd) run(c *call) (*result, error) {
	f := inbox.SearchFilter{Query: strings.Join(c.args, " "), From: r.from, To: r.to, ThreadID: r.thread,
		Kind: r.kind, Type: r.typ, Limit: r.limit}
	if strings.TrimSpace(f.Query) == "" {
		return nil, usagef("query", "QUERY is required: the words to look for, after the flags (\"quoted phrases\" match as phrases)")
	}
	if r.since != "" {
		since, err := parseSince(r.since, time.Now())
		if err != nil {
			return nil, usagef("since", "--since %q is neither a time like 2026-11-26T10:00:00Z nor an age like 90m, 12h or 2d", r.since)
		}
		f.Since = since
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	hits, err := s.Search(c.ctx, f)
	if err != nil {
		return nil, err
	}
	res := &result{}
	res.set("results", hits)
	if len(hits) == 0 {
		res.exit = exitNoWork
	}
	res.human = func(w io.Writer) {
		if len(hits) == 0 {
			fmt.Fprintf(c.env.stderr, "inbox: no message contains %s\n", f.Query)
			return
		}
		for _, h := range hits {
			m := h.Message
			fmt.Fprintf(w, "%s  %s → %s  [%s]  %s  %s\n", shortTime(m.CreatedAt), m.FromAgent, m.ToAgent, m.Kind, h.ThreadID, oneLine(h.Subject, 50))
			fmt.Fprintf(w, "    %s\n", inbox.Printable(h.Snippet))
		}
	}
	return res, nil
}

// parseSince reads --since: an RFC 3339 time, or an age before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := inbox.ParseTime(s); err == nil {
		return t, nil
	}
	d, err := parseAge(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("not a time or an age: %q", s)
	}
	return now.Add(-d), nil
}
