package searchindex

import (
	"slices"
	"time"

	"github.com/inbox-dev/inbox"
)

// Words splits s into the words package inbox's Query.Match compares
// (inbox.SearchWords, SPEC §16). TestWordsAgree holds the index to
// Match's rule.
func Words(s string) []string { return inbox.SearchWords(s) }

// QueryTerms are the terms a message must all hold to match query q: its
// words, quoted or not (a phrase's words are each in a message that holds
// the phrase).
func QueryTerms(q string) []string {
	return dedupe(Words(q))
}

// Terms under which a message is filed besides its words, one for each
// field of inbox.SearchFilter that the index can answer. A word never
// holds the byte 0, so these never meet one.
const (
	fromTerm = "\x00f"
	toTerm   = "\x00t"
	kindTerm = "\x00k"
	typeTerm = "\x00y"
)

// FilterTerms are the terms for f's From, To, Kind and Type: a message
// that f selects holds every one of them.
func FilterTerms(f *inbox.SearchFilter) []string {
	var ts []string
	for _, p := range []struct{ pre, v string }{{fromTerm, f.From}, {toTerm, f.To}, {kindTerm, f.Kind}, {typeTerm, f.Type}} {
		if p.v != "" {
			ts = append(ts, p.pre+p.v)
		}
	}
	return ts
}

// MessageTerms are the terms under which m, a message of the thread with
// subject, is filed: every word of the texts Query.Match reads in it
// (inbox.SearchTexts: the subject on a thread's first message, the
// summary, the body, the payload's keys and strings) and the values
// FilterTerms names. They are sorted, without repeats.
func MessageTerms(m *inbox.Message, subject string) []string {
	var ws []string
	for _, t := range inbox.SearchTexts(m, subject) {
		ws = append(ws, Words(t)...)
	}
	ws = append(ws, fromTerm+m.FromAgent, kindTerm+m.Kind)
	if m.Type != "" {
		ws = append(ws, typeTerm+m.Type)
	}
	for _, r := range inbox.RecipientsOf(m) {
		ws = append(ws, toTerm+r)
	}
	return dedupe(ws)
}

func dedupe(ws []string) []string {
	slices.Sort(ws)
	return slices.Compact(ws)
}

// CreatedMilli is a message's created_at in Unix milliseconds, as a Doc
// keeps it; math.MinInt64 when it does not parse (no Since admits it).
func CreatedMilli(m *inbox.Message) int64 {
	t, err := inbox.ParseTime(m.CreatedAt)
	if err != nil {
		return minCreated
	}
	return t.UnixMilli()
}

// minCreated stands for a created_at that does not parse.
const minCreated = -1 << 63

// Admits reports whether a message created at created (Unix
// milliseconds) can pass a Since of since: false only when it cannot.
func Admits(created int64, since time.Time) bool {
	return since.IsZero() || created >= since.UnixMilli()
}
