package spool_test

import (
	"fmt"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// In-process costs of the store operations (no process start-up). The
// CLI-level comparison with the SQLite reference is ../shared/bench's
// compare.sh; see the README.

func BenchmarkSend(b *testing.B) {
	s, _ := storetest.New(b, spool.Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Send(b.Context(), inbox.SendInput{From: "boss", To: "X", Subject: fmt.Sprint("task ", i),
			Content: inbox.Content{Body: "please do it"}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReply(b *testing.B) {
	s, _ := storetest.New(b, spool.Options{})
	r, _ := s.Send(b.Context(), inbox.SendInput{From: "boss", To: "X", Subject: "long thread"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Reply(b.Context(), "boss", "", r.Thread.ThreadID, inbox.KindProgress, inbox.Content{Summary: "more"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaim(b *testing.B) {
	s, _ := storetest.New(b, spool.Options{})
	ids := make([]string, b.N)
	for i := range ids {
		r, err := s.Send(b.Context(), inbox.SendInput{From: "boss", To: "X", Subject: "t"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.Thread.ThreadID
	}
	b.ResetTimer()
	for _, id := range ids {
		if _, err := s.Claim(b.Context(), "X", id, 900); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetch10k fetches 10 pending threads for X from a store laid out
// like compare.sh's: 10,000 threads, 10 pending for X, 1,000 done by X, the
// rest pending for 30 other agents.
func BenchmarkFetch10k(b *testing.B) {
	s, _ := storetest.New(b, spool.Options{})
	for i := 0; i < 10000; i++ {
		to := fmt.Sprint("a", i%30)
		if i%1000 == 999 || i%10 == 0 {
			to = "X"
		}
		r, err := s.Send(b.Context(), inbox.SendInput{From: "seeder", To: to, Subject: fmt.Sprint("seed ", i)})
		if err != nil {
			b.Fatal(err)
		}
		if i%10 == 0 {
			s.Claim(b.Context(), "X", r.Thread.ThreadID, 900)
			s.Done(b.Context(), "X", r.Thread.ThreadID, 0, inbox.Content{Summary: "done"})
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts, err := s.Fetch(b.Context(), "X", []string{inbox.StatusPending}, 10, false)
		if err != nil || len(ts) != 10 {
			b.Fatalf("fetch: %d threads, %v", len(ts), err)
		}
	}
}
