package inbox

import (
	"cmp"
	"encoding/json"
	"maps"
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

// The bounds of a query (PrepareSearch refuses one beyond them): far
// more than a person types, and they keep a search's cost in proportion
// to the text it reads.
const (
	MaxQueryWords = 64   // words, those of its phrases included
	MaxQueryBytes = 1024 // bytes of the query as given
)

// SearchHit is one message Search found, with its thread and a snippet of
// the text around the first match.
type SearchHit struct {
	Message  *Message `json:"message"`
	ThreadID string   `json:"thread_id"`
	Subject  string   `json:"subject"`
	Snippet  string   `json:"snippet"`
}

// Query is a parsed search query: the terms a message must all contain,
// each a word or a phrase (a sequence of words), lower-cased, and the
// matcher that finds them.
//
// The matcher is an Aho–Corasick automaton over the query's words: a
// text's words are walked once, each moving it by one look-up in a
// table, so that matching costs the text's words whatever the length
// and number of the query's phrases (a phrase compared at every
// position would cost words × phrase length).
type Query struct {
	terms [][]string
	sym   map[string]int32 // a word of the query → its symbol, from 1 (0: any other word)
	nsym  int32            // symbols, 0 included
	next  []int32          // state×nsym + symbol → the state after that word
	out   []uint64         // state×width + i: bit j set when term 64i+j ends at state
	width int              // uint64s of out per state
	all   []uint64         // width uint64s: every term's bit
	ends  []int32          // state → words of the longest term ending at it (0: none)
	// longest is the words of the query's longest term.
	longest int
}

// PrepareSearch checks a search's filter and parses its query, which
// must hold a word and be at most MaxQueryBytes bytes and MaxQueryWords
// words long.
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
	if n := len(f.Query); n > MaxQueryBytes {
		return nil, Invalid("query", "is %d bytes: give at most %d bytes (a few rare words find a message)", n, MaxQueryBytes)
	}
	terms := parseTerms(f.Query)
	if len(terms) == 0 {
		return nil, Invalid("query", "is empty: give at least one word to look for (\"quoted phrases\" match as phrases)")
	}
	n := 0
	for _, t := range terms {
		n += len(t)
	}
	if n > MaxQueryWords {
		return nil, Invalid("query", "has %d words: give at most %d words (a few rare words find a message)", n, MaxQueryWords)
	}
	return compile(terms), nil
}

// ParseQuery splits a query into its terms: each run of words between
// double quotes is a phrase, every other word a term of its own. Its
// matcher takes memory in the square of the query's words, which
// PrepareSearch bounds.
func ParseQuery(s string) *Query { return compile(parseTerms(s)) }

func parseTerms(s string) [][]string {
	var terms [][]string
	for i, part := range strings.Split(s, `"`) {
		ws := SearchWords(part)
		if i%2 == 1 {
			if len(ws) > 0 {
				terms = append(terms, ws)
			}
			continue
		}
		for _, w := range ws {
			terms = append(terms, []string{w})
		}
	}
	return terms
}

// compile builds the matcher of terms: a trie of their words, then, in
// breadth-first order, each state's fallback (the longest proper suffix
// of its words that is a state too), which completes the table of
// moves and passes on the terms that end at the fallback.
func compile(terms [][]string) *Query {
	q := &Query{terms: terms, sym: map[string]int32{}, nsym: 1, width: max(1, (len(terms)+63)/64)}
	q.all = make([]uint64, q.width)
	for i := range terms {
		q.all[i/64] |= 1 << (i % 64)
	}
	for _, t := range terms {
		q.longest = max(q.longest, len(t))
		for _, w := range t {
			if _, ok := q.sym[w]; !ok {
				q.sym[w] = q.nsym
				q.nsym++
			}
		}
	}
	// The trie first: next holds each state's children (0: none, as the
	// root is no one's child), then the moves the breadth-first pass adds.
	ns := int(q.nsym)
	var depth []int32
	newState := func(d int32) int32 {
		q.next = append(q.next, make([]int32, ns)...)
		q.out = append(q.out, make([]uint64, q.width)...)
		q.ends = append(q.ends, 0)
		depth = append(depth, d)
		return int32(len(depth) - 1)
	}
	newState(0)
	for i, t := range terms {
		st := int32(0)
		for _, w := range t {
			at := int(st)*ns + int(q.sym[w])
			if q.next[at] == 0 {
				q.next[at] = newState(depth[st] + 1)
			}
			st = q.next[at]
		}
		q.out[int(st)*q.width+i/64] |= 1 << (i % 64)
		q.ends[st] = depth[st]
	}
	fail := make([]int32, len(depth))
	for queue := []int32{0}; len(queue) > 0; queue = queue[1:] {
		st := queue[0]
		f := fail[st]
		if st != 0 {
			for k := range q.width {
				q.out[int(st)*q.width+k] |= q.out[int(f)*q.width+k]
			}
			if q.ends[st] == 0 {
				q.ends[st] = q.ends[f]
			}
		}
		for c := 1; c < ns; c++ {
			at := int(st)*ns + c
			switch ch := q.next[at]; {
			case ch != 0: // a child: its fallback is where f moves on c
				if st != 0 {
					fail[ch] = q.next[int(f)*ns+c]
				}
				queue = append(queue, ch)
			case st != 0: // none: move as the fallback does (the root stays)
				q.next[at] = q.next[int(f)*ns+c]
			}
		}
	}
	return q
}

// SearchWords splits s into the words search compares (SPEC §16): runs
// of letters and digits, lower-cased. The search index files a message
// under the words of its SearchTexts.
func SearchWords(s string) []string {
	low := strings.ToLower(s)
	var ws []string
	for i := 0; ; {
		start, end := nextWord(low, i)
		if start == end {
			return ws
		}
		ws = append(ws, low[start:end])
		i = end
	}
}

// nextWord returns where the first word of low (lower-cased text) at or
// after byte i starts and ends; start == end when there is none.
func nextWord(low string, i int) (start, end int) {
	for i < len(low) {
		if c := low[i]; c < utf8.RuneSelf {
			if isASCIIWord(c) {
				break
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(low[i:])
		if isWordRune(r) {
			break
		}
		i += n
	}
	start = i
	for i < len(low) {
		if c := low[i]; c < utf8.RuneSelf {
			if !isASCIIWord(c) {
				break
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(low[i:])
		if !isWordRune(r) {
			break
		}
		i += n
	}
	return start, i
}

func isASCIIWord(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || 'A' <= c && c <= 'Z'
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// SearchTexts are the texts of m, a message of the thread with subject,
// that a search reads, in a fixed order: the subject (on the thread's
// first message only), the summary, the body, then the payload's text
// (PayloadTexts). Each is a field of its own: a phrase matches inside
// one, never across two.
func SearchTexts(m *Message, subject string) []string {
	texts := make([]string, 0, 3)
	if m.Seq == 1 && subject != "" {
		texts = append(texts, subject)
	}
	for _, t := range []string{m.Summary, m.Body} {
		if t != "" {
			texts = append(texts, t)
		}
	}
	return PayloadTexts(texts, m.PayloadJSON)
}

// PayloadTexts appends to texts the text a JSON payload holds: each
// object's keys, sorted, each followed by the text of its value; an
// array's elements in order; each string. Numbers, booleans and nulls
// hold none, nor does a payload that does not parse.
func PayloadTexts(texts []string, raw json.RawMessage) []string {
	if len(raw) == 0 {
		return texts
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return texts
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			texts = append(texts, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				texts = append(texts, k)
				walk(x[k])
			}
		}
	}
	walk(v)
	return texts
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
// its texts (SearchTexts) contain every term of q, each inside one text;
// nil otherwise. Its snippet is around the first match: in the first
// text that holds one, the one that ends first.
func (q *Query) Match(m *Message, subject string) *SearchHit {
	texts := SearchTexts(m, subject)
	var found1 [1]uint64
	found := found1[:]
	if q.width > 1 {
		found = make([]uint64, q.width)
	}
	var ring1 [8]wordSpan
	ring := ring1[:]
	if q.longest > len(ring) {
		ring = make([]wordSpan, q.longest)
	}
	first := firstMatch{text: -1}
	all := len(q.terms) == 0
	for i, text := range texts {
		if all {
			break
		}
		all = q.scan(text, i, found, ring, &first)
	}
	if !all {
		return nil
	}
	hit := &SearchHit{Message: m, ThreadID: m.ThreadID, Subject: subject}
	if first.text >= 0 {
		hit.Snippet = snippet(texts[first.text], first.low, first.at, first.end)
	}
	return hit
}

// wordSpan is where a word starts and ends in a lower-cased text.
type wordSpan struct{ start, end int }

// firstMatch is where the first match found starts: texts[text], whose
// lower-cased form is low, holds its first word from at to end.
type firstMatch struct {
	text    int
	low     string
	at, end int
}

// scan walks the words of text, texts[i], adding to found the terms that
// end at each, and reports whether found then holds every term. ring
// keeps the last q.longest words' spans, and first is set at the first
// match.
func (q *Query) scan(text string, i int, found []uint64, ring []wordSpan, first *firstMatch) bool {
	low := strings.ToLower(text)
	st := int32(0)
	for k, at := 0, 0; ; k++ {
		start, end := nextWord(low, at)
		if start == end {
			return false
		}
		at = end
		st = q.next[int(st)*int(q.nsym)+int(q.sym[low[start:end]])]
		ring[k%q.longest] = wordSpan{start, end}
		n := int(q.ends[st])
		if n == 0 {
			continue
		}
		if first.text < 0 {
			w := ring[(k-n+1)%q.longest]
			*first = firstMatch{text: i, low: low, at: w.start, end: w.end}
		}
		all := true
		for j := range found {
			found[j] |= q.out[int(st)*q.width+j]
			all = all && found[j] == q.all[j]
		}
		if all {
			return true
		}
	}
}

// snippetRadius is how many bytes of text a snippet shows on each side of
// the first match.
const snippetRadius = 60

// snippet is the text around the word from at to end of low, text
// lower-cased, on one line, cut at word boundaries where it can be.
func snippet(text, low string, at, end int) string {
	at, end = offsetIn(text, low, at), offsetIn(text, low, end)
	start, stop := max(0, at-snippetRadius), min(len(text), end+snippetRadius)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	for stop < len(text) && !utf8.RuneStart(text[stop]) {
		stop++
	}
	s := strings.Join(strings.Fields(text[start:stop]), " ")
	if start > 0 {
		s = "…" + s
	}
	if stop < len(text) {
		s += "…"
	}
	return s
}

// offsetIn is the byte of text that byte off of low, text lower-cased,
// stands for: lower-casing maps each rune of text (an invalid byte is
// one) to one rune, not always of its length.
func offsetIn(text, low string, off int) int {
	if len(text) == len(low) && text == low {
		return off
	}
	n := utf8.RuneCountInString(low[:off])
	for i := range text {
		if n == 0 {
			return i
		}
		n--
	}
	return len(text)
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
