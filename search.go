package inbox

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// SearchFilter selects the messages Search returns (SPEC §16): those
// whose subject, summary, body or payload text contain every word of
// Query (case-insensitive, whole words; "quoted phrases" as phrases),
// narrowed by the other fields when they are set.
type SearchFilter struct {
	Query    string
	From     string
	To       string // a recipient of the message
	ThreadID string
	Kind     string
	Type     string
	Since    time.Time // messages created at or after it (zero: any)
	Limit    int       // at most this many (0: DefaultSearchLimit)
}

// DefaultSearchLimit is how many hits Search returns when not told.
const DefaultSearchLimit = 20

// SearchHit is one message Search found, with its thread and a snippet of
// the text around the first match.
type SearchHit struct {
	Message  *Message `json:"message"`
	ThreadID string   `json:"thread_id"`
	Subject  string   `json:"subject"`
	Snippet  string   `json:"snippet"`
}

// Query is a parsed search query: the terms a message must all contain,
// each a word or a phrase (a sequence of words), lower-cased.
type Query struct {
	terms [][]string
}

// PrepareSearch checks a search's filter and parses its query.
func PrepareSearch(f *SearchFilter) (*Query, error) {
	for _, a := range []struct{ field, name string }{{"from", f.From}, {"to", f.To}} {
		if a.name != "" {
			if err := ValidateAgent(a.field, a.name); err != nil {
				return nil, err
			}
		}
	}
	if f.ThreadID != "" {
		if err := ValidateID("thread", f.ThreadID); err != nil {
			return nil, err
		}
	}
	if f.Kind != "" && !slices.Contains(Kinds, f.Kind) {
		return nil, Invalid("kind", "%q is not one of %s", f.Kind, strings.Join(Kinds, "|"))
	}
	if f.Limit == 0 {
		f.Limit = DefaultSearchLimit
	}
	if err := ValidateLimit(f.Limit); err != nil {
		return nil, err
	}
	q := ParseQuery(f.Query)
	if len(q.terms) == 0 {
		return nil, Invalid("query", "is empty: give at least one word to look for (\"quoted phrases\" match as phrases)")
	}
	return q, nil
}

// ParseQuery splits a query into its terms: each run of words between
// double quotes is a phrase, every other word a term of its own.
func ParseQuery(s string) *Query {
	q := &Query{}
	for i, part := range strings.Split(s, `"`) {
		ws := words(part)
		if i%2 == 1 {
			if len(ws) > 0 {
				q.terms = append(q.terms, ws)
			}
			continue
		}
		for _, w := range ws {
			q.terms = append(q.terms, []string{w})
		}
	}
	return q
}

// words splits s into lower-cased words: runs of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// Selects reports whether m passes the filter's fields other than the
// query.
func (f *SearchFilter) Selects(m *Message) bool {
	switch {
	case f.From != "" && m.FromAgent != f.From,
		f.To != "" && !slices.Contains(RecipientsOf(m), f.To),
		f.ThreadID != "" && m.ThreadID != f.ThreadID,
		f.Kind != "" && m.Kind != f.Kind,
		f.Type != "" && m.Type != f.Type:
		return false
	}
	if !f.Since.IsZero() {
		t, err := ParseTime(m.CreatedAt)
		if err != nil || t.Before(f.Since) {
			return false
		}
	}
	return true
}

// Match returns the hit for m, a message of the thread with subject, when
// its text contains every term of q; nil otherwise.
func (q *Query) Match(m *Message, subject string) *SearchHit {
	texts := []string{m.Summary, m.Body, payloadText(m.PayloadJSON)}
	if m.Seq == 1 {
		texts = append([]string{subject}, texts...)
	}
	all := words(strings.Join(texts, "\n"))
	for _, t := range q.terms {
		if !containsRun(all, t) {
			return nil
		}
	}
	return &SearchHit{Message: m, ThreadID: m.ThreadID, Subject: subject, Snippet: q.snippet(texts)}
}

// containsRun reports whether the words of run appear one after another
// in ws.
func containsRun(ws, run []string) bool {
	for i := 0; i+len(run) <= len(ws); i++ {
		if slices.Equal(ws[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

// snippetRadius is how many bytes of text a snippet shows on each side of
// the first match.
const snippetRadius = 60

// snippet is the text around the first term found in the first of texts
// that has one, on one line, cut at word boundaries where it can be.
func (q *Query) snippet(texts []string) string {
	for _, text := range texts {
		low := strings.ToLower(text)
		for _, t := range q.terms {
			at := indexWord(low, t[0])
			if at < 0 {
				continue
			}
			start, end := max(0, at-snippetRadius), min(len(text), at+len(t[0])+snippetRadius)
			for start > 0 && !utf8.RuneStart(text[start]) {
				start--
			}
			for end < len(text) && !utf8.RuneStart(text[end]) {
				end++
			}
			s := strings.Join(strings.Fields(text[start:end]), " ")
			if start > 0 {
				s = "…" + s
			}
			if end < len(text) {
				s += "…"
			}
			return s
		}
	}
	return ""
}

// indexWord is the index in low (lower-cased text) of w as a whole word,
// -1 when it is not there.
func indexWord(low, w string) int {
	for from := 0; ; {
		i := strings.Index(low[from:], w)
		if i < 0 {
			return -1
		}
		i += from
		before, _ := utf8.DecodeLastRuneInString(low[:i])
		after, _ := utf8.DecodeRuneInString(low[i+len(w):])
		if (i == 0 || !isWordRune(before)) && (i+len(w) == len(low) || !isWordRune(after)) {
			return i
		}
		from = i + len(w)
	}
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// payloadText is the text a payload holds: its string values, and its
// keys, one a line.
func payloadText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x)
			b.WriteByte('\n')
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				b.WriteString(k)
				b.WriteByte('\n')
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}

// SortHits orders hits newest first (by event id, then message id) and
// keeps at most limit.
func SortHits(hits []*SearchHit, limit int) []*SearchHit {
	slices.SortFunc(hits, func(a, b *SearchHit) int {
		if c := cmp.Compare(b.Message.EventID, a.Message.EventID); c != 0 {
			return c
		}
		return cmp.Compare(b.Message.MessageID, a.Message.MessageID)
	})
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}
