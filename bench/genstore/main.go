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
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/inbox-dev/inbox/internal/benchstore"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: genstore DB N")
		os.Exit(2)
	}
	db := os.Args[1]
	n, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "genstore: N must be a number")
		os.Exit(2)
	}
	if err := fill(context.TODO(), db, n); err != nil {
		fmt.Fprintln(os.Stderr, "genstore:", err)
		os.Exit(1)
	}
}

func fill(ctx context.Context, db string, n int) error {
	t0 := time.Now().Add(-time.Duration(n) * 100 * time.Millisecond)
	readings := 0
	clock := func() time.Time {
		readings++
		return t0.Add(time.Duration(readings) * 25 * time.Millisecond)
	}
	if os.Getenv("GENSTORE_REAL_CLOCK") == "1" {
		clock = nil
	}
	return benchstore.Fill(ctx, db, n, clock)
}
