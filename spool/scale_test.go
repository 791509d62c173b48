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

// Scale benchmarks run on stores made by fillStore. Stores of 100,000
// threads take a minute or two to generate; they run only with
// INBOX_BENCH_SCALE=1:
//
//	INBOX_BENCH_SCALE=1 go test ./spool -run XXX -bench Scale -benchtime 200x

// fillStore generates a store with n threads laid out like compare.sh's
// fetch store (see benchstore.Fill), then opens it normally.
func fillStore(tb testing.TB, n int) (*spool.Store, string) {
	tb.Helper()
	db := filepath.Join(tb.TempDir(), "store")
	if err := benchstore.Fill(tb.Context(), db, n, nil); err != nil {
		tb.Fatal(err)
	}
	s, err := spool.Open(tb.Context(), db, spool.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return s, db
}

func scaleSizes() []int {
	if os.Getenv("INBOX_BENCH_SCALE") == "1" {
		return []int{1000, 10000, 100000}
	}
	return []int{1000, 10000}
}

// BenchmarkScaleFetch: fetch 10 candidates for X; its cost must not grow
// with the store (compare the sizes).
func BenchmarkScaleFetch(b *testing.B) {
	for _, n := range scaleSizes() {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			s, _ := fillStore(b, n)
			want := 10
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ts, err := s.Fetch(b.Context(), "X", []string{inbox.StatusPending}, 10, false)
				if err != nil || len(ts) != want {
					b.Fatalf("fetch: %d threads (want %d), %v", len(ts), want, err)
				}
			}
		})
	}
}

// BenchmarkScaleList: the leader's filters, 20 results each.
func BenchmarkScaleList(b *testing.B) {
	for _, n := range scaleSizes() {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			s, _ := fillStore(b, n)
			filters := map[string]inbox.ListFilter{
				"done":        {Statuses: []string{inbox.StatusDone}, Limit: 20},
				"assigned-to": {AssignedTo: "a7", Limit: 20},
				"all":         {Limit: 20},
			}
			for name, f := range filters {
				b.Run(name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						ts, err := s.List(b.Context(), f)
						if err != nil || len(ts) != 20 {
							b.Fatalf("list %s: %d threads, %v", name, len(ts), err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkScaleShow reads a thread of 10,000 messages.
func BenchmarkScaleShow(b *testing.B) {
	gen, db := storetest.New(b, spool.Options{Unsynced: true})
	r, err := gen.Send(b.Context(), inbox.SendInput{From: "boss", To: "X", Subject: "a long conversation"})
	if err != nil {
		b.Fatal(err)
	}
	tid := r.Thread.ThreadID
	body := strings.Repeat("x", 200)
	for i := 1; i < 10000; i++ {
		if _, err := gen.Reply(b.Context(), "boss", "", tid, inbox.KindProgress, inbox.Content{Summary: fmt.Sprint("step ", i), Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	s, _ := spool.Open(b.Context(), db, spool.Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := s.Show(b.Context(), tid)
		if err != nil || len(v.Messages) != 10000 {
			b.Fatalf("show: %d messages, %v", len(v.Messages), err)
		}
	}
}

// BenchmarkScaleFsck checks a store of 10,000 threads.
func BenchmarkScaleFsck(b *testing.B) {
	s, _ := fillStore(b, 10000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.Fsck(b.Context(), false)
		if err != nil || !r.Clean() {
			b.Fatalf("fsck: %+v %v", r, err)
		}
	}
}

// BenchmarkScaleReindex rebuilds the index of 10,000 threads.
func BenchmarkScaleReindex(b *testing.B) {
	s, _ := fillStore(b, 10000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, err := s.Reindex(b.Context()); err != nil || n != 10000 {
			b.Fatalf("reindex: %d, %v", n, err)
		}
	}
}
