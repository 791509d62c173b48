package spool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/benchstore"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// Search benchmarks run on a store of 100,000 threads (benchstore.Fill:
// about 110,000 messages, each saying "seed N" and "seed body N"), made
// once and kept in the temp directory for the next runs (a minute to
// make; remove $TMPDIR/inbox-bench-search-* to make it again):
//
//	go test ./spool -run '^$' -bench BenchmarkSearch

// searchBenchThreads is the size of the benchmarks' store.
const searchBenchThreads = 100000

// cachedStore opens the benchmark store named name, making it first when
// it is not there yet.
func cachedStore(b *testing.B, name string) (*spool.Store, string) {
	b.Helper()
	db := filepath.Join(os.TempDir(), fmt.Sprintf("inbox-bench-search-%s-%d", name, searchBenchThreads))
	if _, err := os.Stat(filepath.Join(db, "complete")); err != nil {
		os.RemoveAll(db)
		if err := benchstore.Fill(b.Context(), db, searchBenchThreads, nil); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(db, "complete"), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s, err := spool.Open(b.Context(), db, spool.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return s, db
}

// BenchmarkSearch is one search with the index up to date: the files
// loaded and checked, the candidates found and read, as each CLI search
// does.
func BenchmarkSearch(b *testing.B) {
	s, _ := cachedStore(b, "main")
	if _, err := s.Search(b.Context(), inbox.SearchFilter{Query: "seed"}); err != nil {
		b.Fatal(err) // builds the index the first time
	}
	for _, c := range []struct {
		name string
		f    inbox.SearchFilter
		want int
	}{
		{"every-message", inbox.SearchFilter{Query: "seed"}, 20},
		{"one-message", inbox.SearchFilter{Query: "54321"}, 1},
		{"two-common-words", inbox.SearchFilter{Query: "seed body"}, 20},
		{"phrase", inbox.SearchFilter{Query: `"seed body 777"`}, 1},
		{"to-X", inbox.SearchFilter{Query: "seed", To: "X"}, 20},
		{"done-limit-500", inbox.SearchFilter{Query: "done", Limit: 500}, 500},
		{"nothing", inbox.SearchFilter{Query: "absentword"}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				hs, err := s.Search(b.Context(), c.f)
				if err != nil || len(hs) != c.want {
					b.Fatalf("%d hits, want %d: %v", len(hs), c.want, err)
				}
			}
		})
	}
}

// BenchmarkSearchCatchUp is the first search after 1,000 new messages:
// the events read from the log and the index saved, then the search.
func BenchmarkSearchCatchUp(b *testing.B) {
	s, _ := cachedStore(b, "catchup")
	if _, err := s.Search(b.Context(), inbox.SearchFilter{Query: "seed"}); err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		b.StopTimer()
		var ins []inbox.SendInput
		for range 1000 {
			n++
			ins = append(ins, inbox.SendInput{From: "boss", To: "X", Subject: fmt.Sprint("later ", n), Content: inbox.Content{Body: fmt.Sprint("later body ", n)}})
		}
		if _, _, err := s.SendBatch(b.Context(), ins); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if hs, err := s.Search(b.Context(), inbox.SearchFilter{Query: "later"}); err != nil || len(hs) != 20 {
			b.Fatalf("%d hits: %v", len(hs), err)
		}
	}
}

// BenchmarkSearchBuild is a search without an index: it is built from
// every live thread first.
func BenchmarkSearchBuild(b *testing.B) {
	s, db := cachedStore(b, "main")
	for b.Loop() {
		b.StopTimer()
		for _, name := range []string{"search-base.idx", "search-delta.idx"} {
			os.Remove(filepath.Join(db, "index", name))
		}
		b.StartTimer()
		if hs, err := s.Search(b.Context(), inbox.SearchFilter{Query: "seed"}); err != nil || len(hs) != 20 {
			b.Fatalf("%d hits: %v", len(hs), err)
		}
	}
}

// BenchmarkSearchLongPhrase is a search for a phrase of 64 words in 500
// messages that each hold it once, at the end of a body of 2,000 words
// that is the phrase's first word over and over: matching that compares
// the phrase at each position costs words × phrase length per message,
// matching that walks the positions once costs the words.
//
//	go test ./spool -run '^$' -bench BenchmarkSearchLongPhrase
func BenchmarkSearchLongPhrase(b *testing.B) {
	s, _ := storetest.New(b, spool.Options{})
	const messages = 500
	phrase := strings.Repeat("w ", 63) + "z"
	var ins []inbox.SendInput
	for i := range messages {
		ins = append(ins, inbox.SendInput{From: "ann", To: "bob", Subject: fmt.Sprint("long ", i),
			Content: inbox.Content{Body: strings.Repeat("w ", 2000) + phrase}})
	}
	if _, _, err := s.SendBatch(b.Context(), ins); err != nil {
		b.Fatal(err)
	}
	f := inbox.SearchFilter{Query: `"` + phrase + `"`, Limit: messages}
	if _, err := s.Search(b.Context(), f); err != nil {
		b.Fatal(err) // builds the index
	}
	for b.Loop() {
		if hs, err := s.Search(b.Context(), f); err != nil || len(hs) != messages {
			b.Fatalf("%d hits, want %d: %v", len(hs), messages, err)
		}
	}
}
