// Command genstore fills a new store with N threads laid out like
// compare.sh's fetch store (10 pending for X, a tenth claimed and done by
// X, the rest pending for 30 other agents), in seconds rather than the
// half hour CLI seeding of 100,000 threads takes here:
//
//	go run ./bench/genstore DB N
//
// It writes through the spool package without fsync (Options.Unsynced)
// and with a clock that advances 25 ms per reading, so that thread ids,
// and with them the index's time buckets, spread over hours as they do
// when a store fills through the CLI (real ids would put thousands of
// threads in each one-second bucket, a layout CLI use never produces).
// GENSTORE_REAL_CLOCK=1 uses the real clock instead. The store is for
// benchmarks of reads: never one that matters.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/inbox-dev/inbox/spool"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: genstore DB N")
		os.Exit(2)
	}
	db := os.Args[1]
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n < 10 || n%10 != 0 {
		fmt.Fprintln(os.Stderr, "genstore: N must be a multiple of 10, at least 10")
		os.Exit(2)
	}
	if err := fill(db, n); err != nil {
		fmt.Fprintln(os.Stderr, "genstore:", err)
		os.Exit(1)
	}
}

func fill(db string, n int) error {
	created, err := spool.Init(db, false)
	if err != nil {
		return err
	}
	if !created {
		return fmt.Errorf("%s already holds a store", db)
	}
	t0 := time.Now().Add(-time.Duration(n) * 100 * time.Millisecond)
	readings := 0
	clock := func() time.Time {
		readings++
		return t0.Add(time.Duration(readings) * 25 * time.Millisecond)
	}
	if os.Getenv("GENSTORE_REAL_CLOCK") == "1" {
		clock = nil
	}
	s, err := spool.Open(db, spool.Options{Unsynced: true, Now: clock})
	if err != nil {
		return err
	}
	const chunk = 500
	var done []string
	stride := n / 10
	for i := 0; i < n; i += chunk {
		var ins []spool.SendInput
		for j := i; j < min(n, i+chunk); j++ {
			to := fmt.Sprint("a", j%30)
			if j%stride == stride-1 || j%10 == 0 {
				to = "X"
			}
			ins = append(ins, spool.SendInput{From: "seeder", To: to, Subject: fmt.Sprint("seed ", j),
				Content: spool.Content{Body: fmt.Sprint("seed body ", j)}})
		}
		results, errs, err := s.SendBatch(ins)
		if err != nil {
			return err
		}
		for k, r := range results {
			if errs[k] != nil {
				return errs[k]
			}
			if (i+k)%10 == 0 {
				done = append(done, r.Thread.ThreadID)
			}
		}
	}
	for _, tid := range done {
		if _, err := s.Claim("X", tid, 900); err != nil {
			return err
		}
		if _, err := s.Done("X", tid, 0, spool.Content{Summary: "done"}); err != nil {
			return err
		}
	}
	return nil
}
