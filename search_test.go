package inbox

import (
	"strings"
	"testing"
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
