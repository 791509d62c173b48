package searchindex_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/searchindex"
)

// vocabulary mixes short words, case, digits, accents and scripts, and
// separators a tokenizer could get wrong.
var vocabulary = []string{"a", "I", "go", "Go", "x1", "42", "deploy", "DEPLOY", "Straße", "naïve", "日本語", "Ünïcode",
	"can't", "e-mail", "foo_bar", "tab\tbed", "new\nline", "quote\"d", `back\slash`, "émoji😀", "ǅ", "İstanbul", "ß"}

func randomText(r *rand.Rand, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = vocabulary[r.IntN(len(vocabulary))]
	}
	return strings.Join(ws, []string{" ", ", ", ".", "\n", "/"}[r.IntN(5)])
}

func randomMessage(r *rand.Rand, seq int) *inbox.Message {
	payload := map[string]any{randomText(r, 1): randomText(r, 3), "n": 7, "list": []any{randomText(r, 2), true, map[string]any{randomText(r, 1): randomText(r, 1)}}}
	raw, _ := json.Marshal(payload)
	return &inbox.Message{Seq: seq, Summary: randomText(r, 2), Body: randomText(r, 6), PayloadJSON: raw,
		FromAgent: fmt.Sprint("a", r.IntN(3)), ToAgent: fmt.Sprint("b", r.IntN(3)), Kind: inbox.KindProgress}
}

// TestWordsAgree holds MessageTerms and QueryTerms to Query.Match: every
// query Match accepts on a message names only terms the message is filed
// under.
func TestWordsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		m := randomMessage(r, 1+i%2)
		subject := randomText(r, 2)
		terms := searchindex.MessageTerms(m, subject)
		for range 5 {
			q := randomText(r, 1+r.IntN(2))
			if r.IntN(3) == 0 {
				q = `"` + q + `"`
			}
			if inbox.ParseQuery(q).Match(m, subject) == nil {
				continue
			}
			for _, w := range searchindex.QueryTerms(q) {
				if _, ok := slices.BinarySearch(terms, w); !ok {
					t.Fatalf("query %q matches message %+v (subject %q), but its term %q is not among %q", q, m, subject, w, terms)
				}
			}
		}
	}
}

type doc struct {
	d     searchindex.Doc
	terms []string
}

func randomDocs(r *rand.Rand, n int, firstEvent int64) []doc {
	var ds []doc
	for i := range n {
		m := randomMessage(r, 1+r.IntN(3))
		d := searchindex.Doc{EventID: firstEvent + int64(i), Created: int64(r.IntN(1000)), ThreadID: fmt.Sprint("thr_", r.IntN(n/3+1)), Seq: m.Seq}
		ds = append(ds, doc{d, searchindex.MessageTerms(m, "subject")})
	}
	return ds
}

func build(t *testing.T, ds []doc, meta searchindex.Meta) *searchindex.Segment {
	t.Helper()
	b := searchindex.NewBuilder()
	for _, i := range rand.Perm(len(ds)) { // any order
		b.Add(ds[i].d, ds[i].terms)
	}
	data, err := b.Encode(meta)
	if err != nil {
		t.Fatal(err)
	}
	s, err := searchindex.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// check compares every candidate list of s with a scan of ds.
func check(t *testing.T, s *searchindex.Segment, ds []doc) {
	t.Helper()
	if s.Len() != len(ds) {
		t.Fatalf("%d documents, want %d", s.Len(), len(ds))
	}
	for i, d := range ds {
		if got := s.Doc(i); got != d.d {
			t.Fatalf("document %d is %+v, want %+v", i, got, d.d)
		}
	}
	queries := [][]string{{"go"}, {"a", "deploy"}, {"日本語", "\x00fa1"}, {"absent"}, {"ß", "i", "straße"}, {"\x00kprogress"}}
	for _, q := range queries {
		var want []uint32
		for i, d := range ds {
			if !slices.ContainsFunc(q, func(w string) bool { _, ok := slices.BinarySearch(d.terms, w); return !ok }) {
				want = append(want, uint32(i))
			}
		}
		if got := s.Candidates(q); !slices.Equal(got, want) {
			t.Errorf("candidates of %q: %v, want %v", q, got, want)
		}
	}
}

func TestBuildAndMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ds := randomDocs(r, 600, 10)
	meta := searchindex.Meta{Covered: searchindex.Covered{EventID: 700, Segment: 1, Offset: 12345, LineCRC: 99}, Base: 7}
	whole := build(t, ds, meta)
	if whole.Meta != meta {
		t.Errorf("meta %+v, want %+v", whole.Meta, meta)
	}
	check(t, whole, ds)

	a, b := build(t, ds[:450], searchindex.Meta{}), build(t, ds[450:], searchindex.Meta{})
	data, err := searchindex.Merge(a, b, meta)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := searchindex.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	check(t, merged, ds)
	if merged.Threads() > 201 {
		t.Errorf("%d threads after a merge, want at most 201 (no repeats)", merged.Threads())
	}

	// Out of order: b's documents come first.
	data, err = searchindex.Merge(b, a, meta)
	if err != nil {
		t.Fatal(err)
	}
	merged, err = searchindex.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	check(t, merged, ds)

	empty := build(t, nil, searchindex.Meta{})
	data, err = searchindex.Merge(whole, empty, meta)
	if err != nil {
		t.Fatal(err)
	}
	if merged, err = searchindex.Decode(data); err != nil {
		t.Fatal(err)
	}
	check(t, merged, ds)
	if data, err = searchindex.Merge(empty, whole, meta); err == nil {
		merged, err = searchindex.Decode(data)
	}
	if err != nil {
		t.Fatal(err)
	}
	check(t, merged, ds)
}

func TestDamaged(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b := searchindex.NewBuilder()
	for _, d := range randomDocs(r, 50, 1) {
		b.Add(d.d, d.terms)
	}
	data, err := b.Encode(searchindex.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"empty":     {},
		"cut":       data[:len(data)/2],
		"flipped":   slices.Concat(data[:100], []byte{data[100] ^ 1}, data[101:]),
		"appended":  append(slices.Clone(data), 0),
		"not index": []byte("{\"json\":true}"),
	} {
		if _, err := searchindex.Decode(bad); !errors.Is(err, searchindex.ErrDamaged) {
			t.Errorf("%s: got %v, want ErrDamaged", name, err)
		}
	}
}
