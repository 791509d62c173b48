// Package benchstore fills stores for benchmarks: N threads laid out like
// compare.sh's fetch store, written without fsync. It serves the scale
// benchmarks in spool and the bench/genstore command.
package benchstore

import (
	"context"
	"fmt"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/spool"
)

// Fill creates a store at db holding n threads (n a multiple of 10): 10
// pending for X spread through the store, a tenth claimed and done by X,
// and the rest pending for 30 other agents. It writes with
// Options.Unsynced, so the store is fit for benchmarks of reads only.
// clock, when not nil, is the clock the writes read (it sets the thread
// ids' times, and so the index's time buckets).
func Fill(ctx context.Context, db string, n int, clock func() time.Time) error {
	if n < 10 || n%10 != 0 {
		return fmt.Errorf("benchstore: %d threads: give a multiple of 10, at least 10", n)
	}
	created, err := spool.Init(db, false)
	if err != nil {
		return err
	}
	if !created {
		return fmt.Errorf("benchstore: %s already holds a store", db)
	}
	s, err := spool.Open(ctx, db, spool.Options{Unsynced: true, Now: clock})
	if err != nil {
		return err
	}
	const chunk = 500
	var done []string
	stride := n / 10
	for i := 0; i < n; i += chunk {
		var ins []inbox.SendInput
		for j := i; j < min(n, i+chunk); j++ {
			to := fmt.Sprint("a", j%30)
			if j%stride == stride-1 || j%10 == 0 {
				to = "X"
			}
			ins = append(ins, inbox.SendInput{From: "seeder", To: to, Subject: fmt.Sprint("seed ", j),
				Content: inbox.Content{Body: fmt.Sprint("seed body ", j)}})
		}
		results, errs, err := s.SendBatch(ctx, ins)
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
		if _, err := s.Claim(ctx, "X", tid, 900); err != nil {
			return err
		}
		if _, err := s.Done(ctx, "X", tid, 0, inbox.Content{Summary: "done"}); err != nil {
			return err
		}
	}
	return nil
}
