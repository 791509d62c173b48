package spool

import (
	"context"
	"fmt"

	"github.com/inbox-dev/inbox"
)

// reindexSearch rebuilds the search index from the live threads'
// messages and brings it up to the end of the log (inbox reindex).
func (s *Store) reindexSearch(ctx context.Context) error {
	lk := newLock(s.lockFile(searchLockFile), s.fileMode)
	if err := s.lockWithin(ctx, lk, "search index"); err != nil {
		return err
	}
	defer lk.Unlock()
	_, err := s.updateSearchIndex(ctx, true)
	return err
}

// fsckSearch checks the search index: its files whole (damaged_search_index),
// the line of the log it reaches to still there, and every live message
// it should hold by then held (stale_search_index). A missing index is no
// finding: the first search builds it. Repair rebuilds it.
func (s *Store) fsckSearch(ctx context.Context, headers map[string]*header, byEvent map[int64]*inbox.Message, add addFinding, repair bool) error {
	ix := s.loadSearchIndex()
	var found []*inbox.Finding
	for _, p := range ix.damaged {
		found = append(found, add(inbox.Finding{Check: "damaged_search_index", Path: p,
			Detail: "a file of the search index is cut short, altered or of another version; a search rebuilds it"}))
	}
	if ix.base != nil {
		c := ix.covered()
		if stale, _ := s.coveredState(c); stale {
			found = append(found, add(inbox.Finding{Check: "stale_search_index", Path: s.searchFile(searchBaseFile), Detail: fmt.Sprintf(
				"the search index reaches to event %d, which the event log no longer holds where the index says (rolled back after a crash, archived, or another store's); a search rebuilds it", c.EventID)}))
		} else if n := s.unfiled(ix, c.EventID, headers, byEvent); n > 0 {
			found = append(found, add(inbox.Finding{Check: "stale_search_index", Path: s.searchFile(searchBaseFile), Detail: fmt.Sprintf(
				"the search index reaches to event %d but lacks %d live messages added by then, which a search would not find", c.EventID, n)}))
		}
	}
	if !repair || len(found) == 0 {
		return nil
	}
	if err := s.reindexSearch(ctx); err != nil {
		return err
	}
	for _, f := range found {
		f.Detail += "; rebuilt from the threads"
		f.Repaired = true
	}
	return nil
}

// unfiled counts the live messages the index should hold and does not:
// those of threads whose last event it covers.
func (s *Store) unfiled(ix *searchIndex, covered int64, headers map[string]*header, byEvent map[int64]*inbox.Message) int {
	type ref struct {
		tid string
		seq int
	}
	filed := map[ref]bool{}
	for _, seg := range ix.segments() {
		for i := range seg.Len() {
			d := seg.Doc(i)
			filed[ref{d.ThreadID, d.Seq}] = true
		}
	}
	n := 0
	for _, m := range byEvent {
		h := headers[m.ThreadID]
		if h != nil && h.LastEventID <= covered && m.Seq <= h.MessageCount && !filed[ref{m.ThreadID, m.Seq}] {
			n++
		}
	}
	return n
}
