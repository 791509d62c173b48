package natsbus

import (
	"context"
	"fmt"

	"github.com/inbox-dev/inbox"
)

// Search reads the stream's thread records once, in order, and keeps the
// messages f selects, newest first (SPEC §16). It keeps no index: one
// search reads the whole stream (about half a second at 10,000 threads
// on a loaded two-core machine, BenchmarkSearchNATS), and an index would
// have to live in the stream's server beside it, kept by every search.
//
// The search stops when ctx ends, between two records read, with an
// error that wraps ctx's.
func (b *Bus) Search(ctx context.Context, f inbox.SearchFilter) ([]*inbox.SearchHit, error) {
	q, err := inbox.PrepareSearch(&f)
	if err != nil {
		return nil, err
	}
	subject := b.prefix + "t.>"
	if f.ThreadID != "" {
		if _, _, err := b.state(ctx, f.ThreadID); err != nil {
			return nil, stopped(ctx, err)
		}
		subject = b.threadFilter(f.ThreadID)
	}
	hits := []*inbox.SearchHit{}
	err = b.records(ctx, subject, 1, false, func(r *record, _ uint64) bool {
		if ctx.Err() != nil {
			return false
		}
		if m := r.Message; m != nil && f.Selects(m) {
			if hit := q.Match(m, r.Thread.Subject); hit != nil {
				hits = append(hits, hit)
			}
		}
		return true
	})
	if err := stopped(ctx, err); err != nil {
		return nil, err
	}
	return inbox.SortHits(hits, f.Limit), nil
}

// stopped is the error of a search that got err: one that wraps ctx's
// when ctx has ended.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("search stopped: %w", ctx.Err())
	}
	return err
}
