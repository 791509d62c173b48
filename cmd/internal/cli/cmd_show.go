package cli

import (
	"bufio"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox"
)

var showCommand = &command{
	name: "show", short: "inspect one thread's full history",
	long: `The thread-history inspection command: print one thread with its header,
lease and every message in order, with artifacts. fetch and list only show
headers; show is where you read the conversation. --mark-read moves
--agent's read cursor to the latest message shown, which is what
"fetch --unread" compares against. --seed002 prints each message as a
seed-002 line instead ({"type","from","to","timestamp","content",…}).

--max-body-bytes N cuts each message's body to its first N bytes (never
inside a character), for people and in JSON, so that a thread with a huge
body can still be read: the transcript says after a cut body how many
bytes were left out, and JSON lists the cut messages in "bodies_cut"
([{"message_id","bytes_left_out"}]). Payloads and artifacts are not cut.`,
	examples: []string{
		"inbox show --thread thr_01...",
		"inbox show --thread thr_01... --mark-read --agent backend-worker --json",
		"inbox show --thread thr_01... --max-body-bytes 4096",
	},
	new: func() runner { return &showCmd{} },
}

type showCmd struct {
	thread   string
	markRead bool
	seed002  bool
	maxBody  int
}

func (r *showCmd) flags(fs *pflag.FlagSet, c *call) {
	fs.StringVar(&r.thread, "thread", "", "thread id (required)")
	fs.BoolVar(&r.markRead, "mark-read", false, "advance --agent's read cursor to the latest message")
	c.agentFlag("whose read cursor --mark-read advances (env INBOX_AGENT)")
	seed002Flag(fs, &r.seed002)
	fs.IntVar(&r.maxBody, "max-body-bytes", 0, "cut each message body to at most this many bytes, saying how many were left out (0: whole)")
}

func (r *showCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	if r.thread == "" {
		return nil, usagef("thread", "--thread is required")
	}
	if r.maxBody < 0 {
		return nil, usagef("max-body-bytes", "--max-body-bytes %d must be 0 (whole bodies) or more", r.maxBody)
	}
	var agent string
	if r.markRead {
		var err error
		if agent, err = c.agentName("agent"); err != nil {
			return nil, usagef("agent", "--mark-read needs --agent (or INBOX_AGENT): whose cursor to move")
		}
	}
	s, err := c.open()
	if err != nil {
		return nil, err
	}
	v, err := s.Show(c.ctx, r.thread)
	if err != nil {
		return nil, err
	}
	cut := cutBodies(v.Messages, r.maxBody)
	res := &result{}
	res.set("thread", v.Thread).set("messages", v.Messages).set("lease", v.Lease)
	if len(cut) > 0 {
		res.set("bodies_cut", cut)
	}
	if v.Archived {
		res.set("archived", true)
	}
	if v.Origin != nil {
		res.set("origin", v.Origin)
	}
	if r.markRead {
		cur, err := s.MarkRead(c.ctx, agent, r.thread, v.Thread.MessageCount)
		if err != nil {
			return nil, err
		}
		res.set("cursor", cur)
	}
	now := time.Now()
	res.human = func(out io.Writer) {
		// Buffered: a long body is written a line at a time.
		w := bufio.NewWriterSize(out, 64<<10)
		defer w.Flush()
		if v.Archived {
			fmt.Fprintln(w, "(archived: read-only)")
		}
		transcript(w, v, now, cut)
		if r.markRead {
			fmt.Fprintf(w, "\nmarked read for %s up to #%d\n", agent, v.Thread.MessageCount)
		}
	}
	if r.seed002 {
		return asSeed002(c, res)
	}
	return res, nil
}

// bodyCut is a message whose body show cut (--max-body-bytes): its id and
// how many bytes of its body were left out.
type bodyCut struct {
	MessageID string `json:"message_id"`
	LeftOut   int    `json:"bytes_left_out"`
}

// cutBodies cuts the body of each of msgs longer than max bytes (0: no
// cut) to its first max bytes, back to the start of a character, and
// returns what it cut. A cut message is replaced by a copy.
func cutBodies(msgs []*inbox.Message, max int) []bodyCut {
	if max <= 0 {
		return nil
	}
	var cut []bodyCut
	for i, m := range msgs {
		if len(m.Body) <= max {
			continue
		}
		n := max
		for n > 0 && !utf8.RuneStart(m.Body[n]) {
			n--
		}
		c := *m
		c.Body = m.Body[:n]
		msgs[i] = &c
		cut = append(cut, bodyCut{MessageID: m.MessageID, LeftOut: len(m.Body) - n})
	}
	return cut
}
