package natsbus_test

import (
	"fmt"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/natstest"
	"github.com/inbox-dev/inbox/natsbus"
)

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
