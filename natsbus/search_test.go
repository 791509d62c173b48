package natsbus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/natstest"
	"github.com/inbox-dev/inbox/natsbus"
)

// TestSearchStable: the same stream and query give the same answer every
// time, over every thread and over one: a payload's keys are read sorted,
// and a phrase never runs from one field into the next (subject,
// summary, body, each payload key and string value).
func TestSearchStable(t *testing.T) {
	srv := natstest.Start(t)
	bus := create(t, natstest.Store(srv, "stable"))
	r, err := bus.Send(t.Context(), inbox.SendInput{From: "ann", To: "bob", Subject: "Quarterly report", Content: inbox.Content{
		Summary: "summary closes", Body: "body opens", PayloadJSON: `{"k":"report tail","needle":"x","n":"mark two","m":"mark one"}`}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query, snippet string // snippet "": no hit
	}{
		{`"tail needle"`, ""},    // a value into the next key
		{`"closes body"`, ""},    // the summary into the body
		{`"report summary"`, ""}, // the subject into the summary
		{`"opens k"`, ""},        // the body into the payload
		{"mark", "mark one"},     // the first key's value, sorted
		{`"report tail"`, "report tail"},
		{`quarterly "mark two"`, "Quarterly report"},
	} {
		for _, thread := range []string{"", r.Thread.ThreadID} {
			for i := range 50 {
				hs, err := bus.Search(t.Context(), inbox.SearchFilter{Query: c.query, ThreadID: thread})
				if err != nil {
					t.Fatal(err)
				}
				var got string
				if len(hs) > 0 {
					got = hs[0].Snippet
				}
				if len(hs) > 1 || got != c.snippet {
					t.Fatalf("%s (thread %q), search %d: %d hits, snippet %q; want snippet %q", c.query, thread, i+1, len(hs), got, c.snippet)
				}
			}
		}
	}
}

// TestSearchStopsWithContext: a search whose context has ended stops
// with an error that wraps the context's, over every thread and over
// one.
func TestSearchStopsWithContext(t *testing.T) {
	srv := natstest.Start(t)
	bus := create(t, natstest.Store(srv, "stops"))
	r, err := bus.Send(t.Context(), inbox.SendInput{From: "ann", To: "bob", Subject: "haystack", Content: inbox.Content{Body: "a needle"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, thread := range []string{"", r.Thread.ThreadID} {
		hs, err := bus.Search(ctx, inbox.SearchFilter{Query: "needle", ThreadID: thread})
		if !errors.Is(err, context.Canceled) || hs != nil {
			t.Errorf("thread %q: %d hits, error %v; want none and context.Canceled", thread, len(hs), err)
		}
	}
}

// BenchmarkSearchNATS is one search on a stream of 10,000 threads (one
// message each, "seed N" and "seed body N"), on a server in this process:
// what a search costs on NATS, where it reads the stream's thread
// records once.
//
//	go test ./natsbus -run '^$' -bench BenchmarkSearchNATS -benchtime 10x
func BenchmarkSearchNATS(b *testing.B) {
	o := natstest.Options(b.TempDir())
	o.SyncAlways = false // the fill only: searches read
	srv := natstest.StartWith(b, o)
	bus, err := natsbus.Open(b.Context(), natstest.Store(srv, "search"), natsbus.Options{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close()
	const threads = 10000
	for i := 0; i < threads; i += 500 {
		var ins []inbox.SendInput
		for j := i; j < i+500; j++ {
			ins = append(ins, inbox.SendInput{From: "seeder", To: fmt.Sprint("a", j%30), Subject: fmt.Sprint("seed ", j),
				Content: inbox.Content{Body: fmt.Sprint("seed body ", j)}})
		}
		if _, _, err := bus.SendBatch(b.Context(), ins); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		f    inbox.SearchFilter
		want int
	}{
		{"every-message", inbox.SearchFilter{Query: "seed"}, 20},
		{"one-message", inbox.SearchFilter{Query: "5432"}, 1},
		{"nothing", inbox.SearchFilter{Query: "absentword"}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				hs, err := bus.Search(b.Context(), c.f)
				if err != nil || len(hs) != c.want {
					b.Fatalf("%d hits, want %d: %v", len(hs), c.want, err)
				}
			}
		})
	}
}
