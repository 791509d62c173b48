package spool

import (
	"context"
	"errors"
	"fmt"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/searchindex"
)

// Search finds the messages of live threads that f selects, newest first
// (SPEC §16). A search narrowed to one thread reads that thread; any
// other asks the search index (searchidx.go) which messages hold every
// word of the query and the filter's sender, recipient, kind and type,
// reads those candidates newest first from their threads, and keeps
// those Query.Match and f accept until it has f.Limit.
//
// The search stops when ctx ends, between two messages read (or two
// events filed, or two threads read for a rebuilt index), with an error
// that wraps ctx's.
func (s *Store) Search(ctx context.Context, f inbox.SearchFilter) ([]*inbox.SearchHit, error) {
	q, err := inbox.PrepareSearch(&f)
	if err != nil {
		return nil, err
	}
	if f.ThreadID != "" {
		return s.scanThread(ctx, q, &f)
	}
	ix, err := s.currentSearchIndex(ctx)
	if err != nil {
		return nil, err
	}
	terms := append(searchindex.QueryTerms(f.Query), searchindex.FilterTerms(&f)...)
	return s.searchCandidates(ctx, ix, terms, q, &f)
}

// scanThread searches the messages of thread f.ThreadID alone.
func (s *Store) scanThread(ctx context.Context, q *inbox.Query, f *inbox.SearchFilter) ([]*inbox.SearchHit, error) {
	h, err := s.readHeader(f.ThreadID)
	if err != nil {
		return nil, err
	}
	msgs, err := s.readMessages(s.threadDir(f.ThreadID), f.ThreadID, h.MessageCount)
	if err != nil {
		return nil, err
	}
	hits := []*inbox.SearchHit{}
	for _, m := range msgs {
		if err := ctx.Err(); err != nil {
			return nil, searchStopped(err)
		}
		if !f.Selects(m) {
			continue
		}
		if hit := q.Match(m, h.Subject); hit != nil {
			hits = append(hits, hit)
		}
	}
	return inbox.SortHits(hits, f.Limit), nil
}

// searchStopped is the error of a search that its context ended with
// err.
func searchStopped(err error) error { return fmt.Errorf("search stopped: %w", err) }

// candidates walks one file's candidates from the newest.
type candidates struct {
	seg  *searchindex.Segment
	docs []uint32
}

func (c *candidates) newest() int64 { return c.seg.EventID(int(c.docs[len(c.docs)-1])) }

// searchCandidates reads the candidates of every file of ix that hold
// terms, newest first (by event id across the files), and keeps the hits
// until it has f.Limit and the next candidate is older than the last of
// them. A candidate whose thread is gone (archived, or removed by a
// replay) or that its thread no longer counts is skipped; one that two
// files hold is read once.
func (s *Store) searchCandidates(ctx context.Context, ix *searchIndex, terms []string, q *inbox.Query, f *inbox.SearchFilter) ([]*inbox.SearchHit, error) {
	var cs []*candidates
	for _, seg := range ix.segments() {
		if docs := seg.Candidates(terms); len(docs) > 0 {
			cs = append(cs, &candidates{seg, docs})
		}
	}
	type ref struct {
		tid string
		seq int
	}
	seen := map[ref]bool{}
	headers := map[string]*header{} // nil: gone or damaged
	hits := []*inbox.SearchHit{}
	var stopBelow int64
	for len(cs) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, searchStopped(err)
		}
		at := 0
		for i, c := range cs[1:] {
			if c.newest() > cs[at].newest() {
				at = i + 1
			}
		}
		c := cs[at]
		doc := c.seg.Doc(int(c.docs[len(c.docs)-1]))
		if c.docs = c.docs[:len(c.docs)-1]; len(c.docs) == 0 {
			cs = append(cs[:at], cs[at+1:]...)
		}
		if len(hits) >= f.Limit && doc.EventID < stopBelow {
			break
		}
		if !searchindex.Admits(doc.Created, f.Since) || seen[ref{doc.ThreadID, doc.Seq}] {
			continue
		}
		seen[ref{doc.ThreadID, doc.Seq}] = true
		h, ok := headers[doc.ThreadID]
		if !ok {
			var err error
			h, err = s.readHeader(doc.ThreadID)
			if errors.Is(err, inbox.ErrNotFound) || errors.Is(err, inbox.ErrFormat) {
				h, err = nil, nil // gone, or damaged (fsck reports it)
			}
			if err != nil {
				return nil, err
			}
			headers[doc.ThreadID] = h
		}
		if h == nil || doc.Seq < 1 || doc.Seq > h.MessageCount {
			continue
		}
		m, err := s.readMessageAt(s.threadDir(doc.ThreadID), doc.ThreadID, doc.Seq)
		switch {
		case isDamaged(err):
			m = standIn(doc.ThreadID, doc.Seq)
		case errors.Is(err, inbox.ErrNotFound):
			continue // archived since its header was read
		case err != nil:
			return nil, err
		}
		if !f.Selects(m) {
			continue
		}
		if hit := q.Match(m, h.Subject); hit != nil {
			hits = append(hits, hit)
			if len(hits) == f.Limit {
				stopBelow = doc.EventID
			}
		}
	}
	return inbox.SortHits(hits, f.Limit), nil
}
