package inbox

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSearchMatch checks the query rules of SPEC §16 on single messages:
// every term, whole words, case-insensitive, phrases in order, the
// subject only on a thread's first message, and the snippet.
func TestSearchMatch(t *testing.T) {
	m := &Message{Seq: 1, Summary: "Deploy plan", Body: "First drain the queue, then restart the Workers.",
		PayloadJSON: []byte(`{"region":"eu-west","steps":["backup","migrate"]}`)}
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"workers", true},
		{"WORKERS restart", true},
		{"worker", false}, // whole words
		{`"drain the queue"`, true},
		{`"the drain queue"`, false},
		{"eu west migrate", true}, // payload values
		{"region", true},          // payload keys
		{"kubernetes", true},      // the subject, on the first message
		{"deploy kubernetes", true},
		{"deploy absent", false},
	} {
		got := ParseQuery(tc.query).Match(m, "Kubernetes rollout") != nil
		if got != tc.want {
			t.Errorf("%q matched %v, want %v", tc.query, got, tc.want)
		}
	}
	later := *m
	later.Seq = 2
	if ParseQuery("kubernetes").Match(&later, "Kubernetes rollout") != nil {
		t.Error("a later message matched its thread's subject")
	}
	long := &Message{Seq: 2, Body: strings.Repeat("padding words here ", 20) + "the needle is here " + strings.Repeat("more words after ", 20)}
	h := ParseQuery("needle").Match(long, "")
	if h == nil || !strings.Contains(h.Snippet, "needle") || !strings.HasPrefix(h.Snippet, "…") || !strings.HasSuffix(h.Snippet, "…") || len(h.Snippet) > 2*snippetRadius+20 {
		t.Errorf("snippet of a long body: %q", h.Snippet)
	}
	if q := ParseQuery(`  "" `); len(q.terms) != 0 {
		t.Errorf("an empty query has terms: %v", q.terms)
	}
}

// TestSearchFieldBoundaries: a phrase matches inside one field (the
// subject, the summary, the body, one payload key or string value),
// across a line break within it, never across two.
func TestSearchFieldBoundaries(t *testing.T) {
	m := &Message{Seq: 1, Summary: "summary ends here", Body: "body starts here\nand goes on",
		PayloadJSON: []byte(`{"k1":"first value ends","k2":"second value starts","list":["one end","two start"]}`)}
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{`"subject ends"`, true},
		{`"ends summary"`, false},            // subject into summary
		{`"here body"`, false},               // summary into body
		{`"here and goes"`, true},            // a line break inside the body
		{`"on first"`, false},                // body into the payload
		{`"ends second"`, false},             // one payload value into the next
		{`"ends k2"`, false},                 // a value into the next key
		{`"k1 first"`, false},                // a key into its value
		{`"end two"`, false},                 // one array element into the next
		{`"second value starts"`, true},      // inside one value
		{`ends starts "value starts"`, true}, // words may be in different fields
	} {
		got := ParseQuery(tc.query).Match(m, "the subject ends") != nil
		if got != tc.want {
			t.Errorf("%s matched %v, want %v", tc.query, got, tc.want)
		}
	}
}

// TestSearchDeterministic: the text of a payload with several keys is
// read in one order (keys sorted, arrays in order), so that the same
// message and query give the same answer and snippet every time.
func TestSearchDeterministic(t *testing.T) {
	m := &Message{Seq: 2, Summary: "s", PayloadJSON: []byte(
		`{"zulu":"needle zulu tail","echo":"tail needle echo","alpha":"alpha needle","mike":["needle mike"],"kilo":{"needle":"x"}}`)}
	for _, query := range []string{`"tail needle"`, "needle", `"zulu tail"`, `"alpha needle"`} {
		first := ParseQuery(query).Match(m, "")
		for range 50 {
			h := ParseQuery(query).Match(m, "")
			if (h == nil) != (first == nil) || h != nil && h.Snippet != first.Snippet {
				t.Fatalf("%s: got %+v, then %+v", query, first, h)
			}
		}
	}
	// Sorted keys: alpha's value is the first payload text holding it.
	if h := ParseQuery("needle").Match(m, ""); h == nil || h.Snippet != "alpha needle" {
		t.Errorf("snippet of needle: %+v, want alpha's value", h)
	}
}

// TestPrepareSearchBounds: a query is at most MaxQueryWords words and
// MaxQueryBytes bytes; one over either is refused naming query and the
// limit.
func TestPrepareSearchBounds(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  string // "" to accept
	}{
		{strings.Repeat("w ", MaxQueryWords), ""},
		{`"` + strings.Repeat("w ", MaxQueryWords) + `"`, ""},
		{strings.Repeat("w ", MaxQueryWords+1), "at most 64 words"},
		{`"` + strings.Repeat("w ", MaxQueryWords/2) + `" "` + strings.Repeat("w ", MaxQueryWords/2+1) + `"`, "at most 64 words"},
		{strings.Repeat("x", MaxQueryBytes), ""},
		{strings.Repeat("x", MaxQueryBytes+1), "at most 1024 bytes"},
		{strings.Repeat(" ", MaxQueryBytes) + "x", "at most 1024 bytes"},
	} {
		_, err := PrepareSearch(&SearchFilter{Query: tc.query})
		var e *Error
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("query of %d bytes: %v", len(tc.query), err)
		case tc.want != "" && (!errors.As(err, &e) || e.Field != "query" || !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("query of %d bytes: got %v, want invalid query naming %q", len(tc.query), err, tc.want)
		}
	}
}

// BenchmarkMatchLongPhrase is Match of a phrase of 64 words that a body
// of 5,000 words holds only at its end, the rest being its first word
// over and over: a matcher that compares the phrase at each position
// does 5,000 × 64 comparisons, one that walks the positions once 5,000.
func BenchmarkMatchLongPhrase(b *testing.B) {
	m := &Message{Seq: 2, Body: strings.Repeat("w ", 5000) + strings.Repeat("w ", 63) + "z"}
	q := ParseQuery(`"` + strings.Repeat("w ", 63) + `z"`)
	for b.Loop() {
		if q.Match(m, "") == nil {
			b.Fatal("no match")
		}
	}
}

// TestMatchAgreesWithNaive holds Match to the rule it implements, written
// the slow way: every term is the run of words of some one text. Texts
// and phrases are drawn from three words, so that phrases overlap,
// repeat and half-match often.
func TestMatchAgreesWithNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 16))
	vocab := []string{"a", "b", "A", "c"}
	text := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = vocab[r.IntN(len(vocab))]
		}
		return strings.Join(ws, []string{" ", ", ", "\n"}[r.IntN(3)])
	}
	naive := func(q [][]string, texts []string) bool {
		for _, term := range q {
			ok := false
			for _, tx := range texts {
				ws := SearchWords(tx)
				for i := 0; i+len(term) <= len(ws) && !ok; i++ {
					ok = slices.Equal(ws[i:i+len(term)], term)
				}
			}
			if !ok {
				return false
			}
		}
		return true
	}
	matched := 0
	for range 20000 {
		m := &Message{Seq: 1 + r.IntN(2), Summary: text(r.IntN(4)), Body: text(r.IntN(12)),
			PayloadJSON: []byte(fmt.Sprintf(`{"k":%q,"j":[%q,%q]}`, text(2), text(3), text(1)))}
		subject := text(r.IntN(3))
		var parts []string
		for range 1 + r.IntN(3) {
			if p := text(1 + r.IntN(4)); r.IntN(2) == 0 {
				parts = append(parts, `"`+p+`"`)
			} else {
				parts = append(parts, p)
			}
		}
		query := strings.Join(parts, " ")
		q := ParseQuery(query)
		h := q.Match(m, subject)
		if want := naive(q.terms, SearchTexts(m, subject)); (h != nil) != want {
			t.Fatalf("query %s on %+v (subject %q, texts %q): matched %v, want %v", query, m, subject, SearchTexts(m, subject), h != nil, want)
		}
		if h != nil {
			matched++
			if h.Snippet == "" {
				t.Fatalf("query %s on %q: no snippet", query, SearchTexts(m, subject))
			}
		}
	}
	if matched < 1000 {
		t.Errorf("only %d of 20000 queries matched: the test says little", matched)
	}
}

// FuzzMatch holds PrepareSearch and Match to their rules on any query and
// text, hostile ones among the seeds (unbalanced and repeated quotes,
// invalid UTF-8, NUL, text that lower-cases to other lengths): a query is
// refused or parsed, never a panic; Match agrees with a run of words
// looked for the slow way in each field; a snippet is cut on rune
// boundaries of the text it comes from.
func FuzzMatch(f *testing.F) {
	for _, s := range []struct{ query, body string }{
		{`"a b"`, "a b"},
		{`"`, `"`},
		{strings.Repeat(`"`, 500), "x"},
		{`"a`, "a"},
		{`a"b"c`, "a b c"},
		{"\xff\xfe a", "\xff a \xfe"},
		{"\x00 nul", "nul\x00nul"},
		{"istanbul", "İstanbul İSTANBUL"},
		{`"ǅ ß"`, "ǅ ß ǅ ß"},
		{`"日本語"`, "日本語のテキスト"},
		{strings.Repeat("w ", 70), strings.Repeat("w ", 70)},
		{strings.Repeat("x", 1100), strings.Repeat("x", 1100)},
	} {
		f.Add(s.query, s.body)
	}
	f.Fuzz(func(t *testing.T, query, body string) {
		q, err := PrepareSearch(&SearchFilter{Query: query})
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("query %q: %v", query, err)
			}
			return
		}
		m := &Message{Seq: 1, Body: body, Summary: "s " + body}
		h := q.Match(m, body)
		want := true
		for _, term := range q.terms {
			found := false
			for _, tx := range SearchTexts(m, body) {
				ws := SearchWords(tx)
				for i := 0; i+len(term) <= len(ws) && !found; i++ {
					found = slices.Equal(ws[i:i+len(term)], term)
				}
			}
			want = want && found
		}
		if (h != nil) != want {
			t.Fatalf("query %q on %q: matched %v, want %v", query, body, h != nil, want)
		}
		if h != nil && utf8.ValidString(body) && !utf8.ValidString(h.Snippet) {
			t.Fatalf("query %q on %q: snippet %q is not UTF-8", query, body, h.Snippet)
		}
	})
}
