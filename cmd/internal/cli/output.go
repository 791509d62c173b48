package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonrec"
)

// obj is a JSON object that keeps its keys in insertion order, so every
// response starts with "ok" and "command".
type obj struct {
	keys []string
	vals map[string]any
}

func (o *obj) set(k string, v any) *obj {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
	return o
}

func (o *obj) MarshalJSON() ([]byte, error) { return o.appendJSON(nil) }

func (o *obj) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonrec.AppendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, o.vals[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendValue appends v as JSON. The store's records and the plain values
// responses carry are written directly: encoding/json's reflection costs
// a short-lived process several hundred microseconds the first time it
// meets a type. Anything else goes through encodeJSON; both give the same
// bytes (output_test.go).
func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return jsonrec.AppendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case []string:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonrec.AppendString(b, s)
		}
		return append(b, ']'), nil
	case map[string]string:
		if v == nil {
			return append(b, "null"...), nil
		}
		keys := slices.Sorted(maps.Keys(v))
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonrec.AppendString(b, k)
			b = jsonrec.AppendString(append(b, ':'), v[k])
		}
		return append(b, '}'), nil
	case *obj:
		return v.appendJSON(b)
	case *inbox.Thread:
		return appendRecord(b, v), nil
	case *inbox.Message:
		return appendRecord(growFor(b, v), v), nil
	case *inbox.Lease:
		return appendRecord(b, v), nil
	case *inbox.Event:
		return appendRecord(b, v), nil
	case *inbox.Cursor:
		return appendRecord(b, v), nil
	case []*inbox.Thread:
		return appendRecords(b, v), nil
	case []*inbox.Message:
		return appendRecords(growFor(b, v...), v), nil
	case []*inbox.Event:
		return appendRecords(b, v), nil
	}
	vb, err := encodeJSON(v)
	return append(b, vb...), err
}

// record is a store record that writes itself as JSON.
type record interface {
	comparable
	AppendJSON([]byte) []byte
}

func appendRecord[R record](b []byte, r R) []byte {
	var zero R
	if r == zero {
		return append(b, "null"...)
	}
	return r.AppendJSON(b)
}

func appendRecords[R record](b []byte, rs []R) []byte {
	if rs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRecord(b, r)
	}
	return append(b, ']')
}

// encodeJSON marshals without HTML escaping (bodies stay readable).
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// result is what a command hands back to run: the JSON members after ok
// and command, a renderer for people, and the exit code (0 or 10).
type result struct {
	body  obj
	human func(w io.Writer)
	exit  int
	// failed prints "ok":false: the command ran but its answer is a
	// failure (fsck found problems).
	failed bool
}

func (r *result) set(k string, v any) *result {
	r.body.set(k, v)
	return r
}

func (r *result) get(k string) any { return r.body.vals[k] }

// printWarnings writes each of ws to stderr as "inbox: warning: …".
func (c *call) printWarnings(ws []string) {
	for _, w := range ws {
		fmt.Fprintf(c.env.stderr, "inbox: warning: %s\n", inbox.Printable(w))
	}
}

// warn reports warnings: on stderr for people, and as "warnings" in the
// JSON result.
func (r *result) warn(c *call, ws []string) {
	if len(ws) == 0 {
		return
	}
	c.printWarnings(ws)
	if prev, ok := r.body.vals["warnings"].([]string); ok {
		ws = append(prev, ws...)
	}
	r.set("warnings", ws)
}

// humanWriter is how output for people reaches them (SPEC §4): every
// human view writes through one (emit gives it to the renderer), which
// escapes every control character but newline and tab, every C1 control,
// bidi override and byte that is not UTF-8 (inbox.PrintableText), so no
// sender's text can act on the reader's terminal, whatever view prints
// it and however. A one-line field must escape its own newlines and tabs
// as well (inbox.Printable, oneLine; table does it for every cell).
// Output is kept until 64 KiB are waiting, then written; Flush writes
// the rest.
type humanWriter struct {
	w   io.Writer
	buf []byte
	// tail is the start of a character cut off at the end of the last
	// Write, escaped with what follows it.
	tail []byte
	err  error
}

const humanWriterBuffer = 64 << 10

func newHumanWriter(w io.Writer) *humanWriter { return &humanWriter{w: w} }

func (h *humanWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(h.tail) > 0 {
		p = append(h.tail, p...)
		h.tail = nil
	}
	// An incomplete UTF-8 sequence at the end may be completed by the
	// next Write.
	keep := 0
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				keep = len(p) - i
			}
			break
		}
	}
	// Room for what comes and a few escapes, so that a long body is
	// copied once.
	h.buf = slices.Grow(h.buf, len(p)+len(p)/8)
	h.buf = inbox.AppendPrintable(h.buf, p[:len(p)-keep], true)
	if keep > 0 {
		h.tail = append([]byte(nil), p[len(p)-keep:]...)
	}
	if len(h.buf) >= humanWriterBuffer {
		h.write()
	}
	return n, h.err
}

// Flush writes what is waiting, an incomplete character at the end as
// its bytes, escaped.
func (h *humanWriter) Flush() error {
	if len(h.tail) > 0 {
		h.buf = inbox.AppendPrintable(h.buf, h.tail, true)
		h.tail = nil
	}
	h.write()
	return h.err
}

func (h *humanWriter) write() {
	if len(h.buf) > 0 && h.err == nil {
		_, h.err = h.w.Write(h.buf)
	}
	h.buf = h.buf[:0]
}

// table writes aligned columns, each cell a one-line field.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	writeRow := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				io.WriteString(tw, "\t")
			}
			io.WriteString(tw, inbox.Printable(c))
		}
		io.WriteString(tw, "\n")
	}
	writeRow(header)
	for _, r := range rows {
		writeRow(r)
	}
	tw.Flush()
}

func threadRows(ts []*inbox.Thread) [][]string {
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		status := t.Status
		if t.LeaseExpired {
			status += " (lease expired)" // claimable again (SPEC §4)
		}
		if t.Mail {
			status += " (mail)" // not work: nobody's to claim (SPEC §7)
		}
		rows = append(rows, []string{t.ThreadID, status, t.Priority, t.AssignedTo, t.CreatedBy,
			shortTime(t.UpdatedAt), oneLine(t.Subject, 60)})
	}
	return rows
}

var threadHeader = []string{"THREAD", "STATUS", "PRIORITY", "ASSIGNED", "CREATED-BY", "UPDATED", "SUBJECT"}

// shortTime renders a stored timestamp as "2006-01-02 15:04:05".
func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// oneLine is s as a one-line field of at most n characters: escaped
// (inbox.Printable: its newlines and tabs too), runs of spaces made one,
// and cut with "…" when longer, never inside an escape.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(inbox.Printable(s)), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut := 0
	for range n - 1 {
		_, size := utf8.DecodeRuneInString(s[cut:])
		cut += size
	}
	// The longest escape is \u202e: a backslash among the last five
	// bytes kept may start one the cut would split.
	from := max(0, cut-5)
	if j := strings.LastIndexByte(s[from:cut], '\\'); j >= 0 && from+j+escapeLen(s[from+j:]) > cut {
		cut = from + j
	}
	return s[:cut] + "…"
}

// escapeLen is the length of the escape inbox.Printable wrote at the
// start of s (a backslash): 1 when it is a backslash of the text.
func escapeLen(s string) int {
	if len(s) > 1 {
		switch s[1] {
		case 'n', 't', 'r':
			return 2
		case 'x':
			return 4
		case 'u':
			return 6
		}
	}
	return 1
}

func leaseLine(l *inbox.Lease, now time.Time) string {
	if l == nil {
		return "none"
	}
	switch {
	case l.Released() && !expiredRelease(l):
		return fmt.Sprintf("released by %s at %s (token %d)", l.AgentID, shortTime(*l.ReleasedAt), l.LeaseToken)
	case l.Live(now):
		return fmt.Sprintf("held by %s until %s (token %d)", l.AgentID, shortTime(l.ExpiresAt), l.LeaseToken)
	}
	return fmt.Sprintf("expired at %s (held by %s, token %d)", shortTime(l.ExpiresAt), l.AgentID, l.LeaseToken)
}

// expiredRelease reports whether released lease l ran out rather than
// being let go: the daemon releases an expired lease at its expiry, while
// its holder (done, fail) can release it only while it is live.
func expiredRelease(l *inbox.Lease) bool {
	rel, err1 := inbox.ParseTime(*l.ReleasedAt)
	exp, err2 := inbox.ParseTime(l.ExpiresAt)
	return err1 == nil && err2 == nil && !rel.Before(exp)
}

// recipientsOf is who a message went to.
func recipientsOf(m *inbox.Message) []string {
	if len(m.Recipients) > 0 {
		return m.Recipients
	}
	return []string{m.ToAgent}
}

// transcript renders a thread for people; cut lists the messages whose
// body show cut, each marked after its body. Every field but a body is
// one line (inbox.Printable); the body keeps its lines and tabs.
func transcript(w io.Writer, v *inbox.ThreadView, now time.Time, cut []bodyCut) {
	t := v.Thread
	fmt.Fprintf(w, "%s  %s\n", t.ThreadID, inbox.Printable(t.Subject))
	fmt.Fprintf(w, "  status %s · priority %s · created by %s · assigned to %s\n", t.Status, t.Priority, t.CreatedBy, t.AssignedTo)
	if t.RunID != "" || t.TaskID != "" {
		fmt.Fprintf(w, "  run %s · task %s\n", dash(t.RunID), dash(t.TaskID))
	}
	fmt.Fprintf(w, "  lease: %s\n", leaseLine(v.Lease, now))
	fmt.Fprintf(w, "  %d messages · created %s · updated %s · last event %d\n", t.MessageCount,
		shortTime(t.CreatedAt), shortTime(t.UpdatedAt), t.LastEventID)
	for _, m := range v.Messages {
		fmt.Fprintln(w)
		status := ""
		if m.Status != "" {
			status = " → " + m.Status
		}
		if m.Damaged {
			status += "; DAMAGED"
		}
		fmt.Fprintf(w, "#%d  %s  %s → %s  [%s%s]  %s\n", m.Seq, shortTime(m.CreatedAt), m.FromAgent, m.ToAgent, kindLabel(m), status, m.MessageID)
		if m.RequestID != "" {
			fmt.Fprintf(w, "    request %s\n", inbox.Printable(m.RequestID))
		}
		if m.AckID != "" && m.Type != inbox.TypeAcknowledgment {
			fmt.Fprintf(w, "    asks %s for acknowledgment\n", strings.Join(recipientsOf(m), ", "))
		}
		fmt.Fprintf(w, "    %s\n", inbox.Printable(m.Summary))
		if m.Body != "" && m.Body != m.Summary {
			for line := range strings.SplitSeq(strings.TrimRight(m.Body, "\n"), "\n") {
				fmt.Fprintf(w, "    │ %s\n", line)
			}
		}
		for _, c := range cut {
			if c.MessageID == m.MessageID {
				fmt.Fprintf(w, "    │ … cut at %d bytes: %d more left out (inbox show without --max-body-bytes prints it whole)\n", len(m.Body), c.LeftOut)
			}
		}
		if p := string(m.PayloadJSON); p != "" && p != "{}" {
			fmt.Fprintf(w, "    payload: %s\n", inbox.Printable(p))
		}
		for _, a := range m.Artifacts {
			meta := ""
			if md := string(a.MetadataJSON); md != "" && md != "{}" {
				meta = " " + md
			}
			fmt.Fprintf(w, "    artifact: %s (%s)%s\n", inbox.Printable(a.Path), inbox.Printable(a.Kind), inbox.Printable(meta))
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
