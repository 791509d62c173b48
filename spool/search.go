package spool

import (
	"context"
	"errors"

	"github.com/inbox-dev/inbox"
)

// Search reads the messages of every live thread (of f.ThreadID alone,
// when set) and keeps those f selects, newest first (SPEC §16). It keeps
// no index: it reads what the threads hold.
func (s *Store) Search(ctx context.Context, f inbox.SearchFilter) ([]*inbox.SearchHit, error) {
	q, err := inbox.PrepareSearch(&f)
	if err != nil {
		return nil, err
	}
	tids := []string{f.ThreadID}
	if f.ThreadID == "" {
		if tids, err = s.threadIDs(); err != nil {
			return nil, err
		}
	}
	hits := []*inbox.SearchHit{}
	for _, tid := range tids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if inbox.ValidateID("thread", tid) != nil {
			continue
		}
		h, err := s.readHeader(tid)
		if errors.Is(err, inbox.ErrNotFound) || errors.Is(err, inbox.ErrFormat) {
			if f.ThreadID != "" {
				return nil, err
			}
			continue // gone, or damaged (fsck reports it)
		}
		if err != nil {
			return nil, err
		}
		msgs, err := s.readMessages(s.threadDir(tid), tid, h.MessageCount)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if !f.Selects(m) {
				continue
			}
			if hit := q.Match(m, h.Subject); hit != nil {
				hits = append(hits, hit)
			}
		}
	}
	return inbox.SortHits(hits, f.Limit), nil
}
