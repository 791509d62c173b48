package spool_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// The search index (index/search-*.idx) is derived data: these tests
// check that a search answers as a scan of every live thread would, as
// the index catches up, after it is damaged or lost, and through
// reindex and fsck.

// searchFiles are the index's files in store db.
func searchFiles(db string) []string {
	fs, _ := filepath.Glob(filepath.Join(db, "index", "search-*.idx"))
	return fs
}

// scanSearch is what f finds without the index: each thread searched
// alone (a search narrowed to one thread reads that thread), the hits
// put together in order.
func scanSearch(t *testing.T, s *spool.Store, tids []string, f inbox.SearchFilter) []string {
	t.Helper()
	limit := f.Limit
	var hits []*inbox.SearchHit
	for _, tid := range tids {
		g := f
		g.ThreadID, g.Limit = tid, inbox.MaxLimit
		hs, err := s.Search(t.Context(), g)
		if err != nil {
			if errors.Is(err, inbox.ErrNotFound) {
				continue // archived
			}
			t.Fatalf("search %+v: %v", g, err)
		}
		hits = append(hits, hs...)
	}
	if limit == 0 {
		limit = inbox.DefaultSearchLimit
	}
	return hitIDs(inbox.SortHits(hits, limit))
}

func hitIDs(hs []*inbox.SearchHit) []string {
	ids := []string{}
	for _, h := range hs {
		ids = append(ids, h.Message.MessageID)
	}
	return ids
}

func search(t *testing.T, s *spool.Store, f inbox.SearchFilter) []string {
	t.Helper()
	hs, err := s.Search(t.Context(), f)
	if err != nil {
		t.Fatalf("search %+v: %v", f, err)
	}
	return hitIDs(hs)
}

// words of the random store: short ones, common ones, rare ones.
var searchWords = []string{"a", "an", "go", "db", "x", "deploy", "postgres", "queue", "the", "the", "the", "of", "of",
	"rollback", "Straße", "日本", "v2", "42", "alpha", "beta", "gamma", "delta", "rare1", "rare2"}

func randomWords(r *rand.Rand, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = searchWords[r.IntN(len(searchWords))]
	}
	return strings.Join(ws, " ")
}

// randomStore adds n random messages to s: new threads and replies,
// some with payloads and recipients of several kinds.
func randomStore(t *testing.T, r *rand.Rand, s *spool.Store, tids *[]string, n int) {
	t.Helper()
	agents := []string{"ann", "bob", "cat"}
	for range n {
		from, to := agents[r.IntN(3)], agents[r.IntN(3)]
		c := inbox.Content{Summary: randomWords(r, 1+r.IntN(2)), Body: randomWords(r, r.IntN(8))}
		if r.IntN(4) == 0 {
			c.PayloadJSON = fmt.Sprintf(`{"%s":"%s"}`, searchWords[r.IntN(len(searchWords))], randomWords(r, 2))
		}
		if len(*tids) == 0 || r.IntN(3) == 0 {
			res, err := s.Send(t.Context(), inbox.SendInput{From: from, To: to, Subject: randomWords(r, 3), Content: c})
			if err != nil {
				t.Fatal(err)
			}
			*tids = append(*tids, res.Thread.ThreadID)
			continue
		}
		tid := (*tids)[r.IntN(len(*tids))]
		kind := []string{inbox.KindProgress, inbox.KindQuestion, inbox.KindAnswer}[r.IntN(3)]
		if _, err := s.Reply(t.Context(), from, "", tid, kind, c); err != nil {
			t.Fatal(err)
		}
	}
}

func randomFilter(r *rand.Rand, since time.Time) inbox.SearchFilter {
	f := inbox.SearchFilter{Query: randomWords(r, 1+r.IntN(2)), Limit: []int{0, 1, 3, 500}[r.IntN(4)]}
	if r.IntN(4) == 0 {
		f.Query = `"` + f.Query + `"`
	}
	switch r.IntN(6) {
	case 0:
		f.From = "bob"
	case 1:
		f.To = "cat"
	case 2:
		f.Kind = inbox.KindQuestion
	case 3:
		f.Since = since
	}
	return f
}

// TestSearchIndexMatchesScan: on a random store, with short, common and
// rare words, phrases and filters, the index answers as the scan does,
// while it catches up with new messages, after an archive and after its
// files are lost.
func TestSearchIndexMatchesScan(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	r := rand.New(rand.NewPCG(7, 8))
	var tids []string
	var since time.Time
	compare := func(round string) {
		t.Helper()
		for range 40 {
			f := randomFilter(r, since)
			if got, want := search(t, s, f), scanSearch(t, s, tids, f); !slices.Equal(got, want) {
				t.Fatalf("%s: search %+v: got %v, want %v", round, f, got, want)
			}
		}
	}
	randomStore(t, r, s, &tids, 150)
	since = time.Now()
	randomStore(t, r, s, &tids, 150)
	compare("first build")
	if len(searchFiles(db)) == 0 {
		t.Fatal("no index file after a search")
	}
	for i := range 5 {
		randomStore(t, r, s, &tids, 1+r.IntN(60))
		compare(fmt.Sprint("catch-up ", i))
	}
	// Finished threads archived, and the log's segments with them.
	for _, tid := range tids[:20] {
		if _, err := s.Cancel(t.Context(), "boss", tid, inbox.Content{Summary: "done with it"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Archive(t.Context(), 0, nil); err != nil {
		t.Fatal(err)
	}
	tids = tids[20:]
	compare("after archive")
	randomStore(t, r, s, &tids, 50)
	compare("after archive and more messages")
	for _, p := range searchFiles(db) {
		os.Remove(p)
	}
	compare("index lost")
}

// TestSearchIndexCatchesUp: messages sent after the index was made are
// found by the next search, and the index then holds them.
func TestSearchIndexCatchesUp(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	var want []string
	for i := range 5 {
		r, err := s.Send(t.Context(), inbox.SendInput{From: "ann", To: "bob", Subject: fmt.Sprint("plan ", i), Content: inbox.Content{Body: "migrate the orders table"}})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{r.Message.MessageID}, want...)
	}
	if got := search(t, s, inbox.SearchFilter{Query: "orders"}); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	files := searchFiles(db)
	if len(files) == 0 {
		t.Fatal("no index file after a search")
	}
	r, err := s.Reply(t.Context(), "bob", "", hitThread(t, s, want[0]), inbox.KindAnswer, inbox.Content{Body: "orders migrated"})
	if err != nil {
		t.Fatal(err)
	}
	want = append([]string{r.Message.MessageID}, want...)
	if got := search(t, s, inbox.SearchFilter{Query: "ORDERS"}); !slices.Equal(got, want) {
		t.Fatalf("after a reply: got %v, want %v", got, want)
	}
	// A second Store (another process) reads what the first saved.
	s2, err := spool.Open(t.Context(), db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := search(t, s2, inbox.SearchFilter{Query: "migrated"}); !slices.Equal(got, want[:1]) {
		t.Fatalf("from another store: got %v, want %v", got, want[:1])
	}
}

func hitThread(t *testing.T, s *spool.Store, mid string) string {
	t.Helper()
	hs, err := s.Search(t.Context(), inbox.SearchFilter{Query: "orders", Limit: inbox.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.Message.MessageID == mid {
			return h.ThreadID
		}
	}
	t.Fatalf("message %s not found", mid)
	return ""
}

// TestSearchIndexDamaged: an index file cut short, overwritten with
// garbage, emptied or replaced by a directory is rebuilt, never an error.
func TestSearchIndexDamaged(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(p string) error
	}{
		{"cut", func(p string) error { return os.Truncate(p, 40) }},
		{"empty", func(p string) error { return os.Truncate(p, 0) }},
		{"garbage", func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("garbage ", 100)), 0o600) }},
		{"flipped", func(p string) error {
			data, err := os.ReadFile(p)
			if err == nil {
				data[len(data)/2] ^= 0x40
				err = os.WriteFile(p, data, 0o600)
			}
			return err
		}},
		{"removed", os.Remove},
		{"another version", func(p string) error {
			// Whole and checksummed, but of a version this one does not
			// read (as an index written before a format change).
			data, err := os.ReadFile(p)
			if err == nil {
				binary.LittleEndian.PutUint32(data[8:], 99)
				body := data[:len(data)-4]
				binary.LittleEndian.PutUint32(data[len(body):], crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
				err = os.WriteFile(p, data, 0o600)
			}
			return err
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			s, db := storetest.New(t, spool.Options{})
			var tids []string
			randomStore(t, rand.New(rand.NewPCG(9, 10)), s, &tids, 40)
			f := inbox.SearchFilter{Query: "the", Limit: 7}
			want := scanSearch(t, s, tids, f)
			if got := search(t, s, f); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			files := searchFiles(db)
			if len(files) == 0 {
				t.Fatal("no index file after a search")
			}
			for _, p := range files {
				if err := damage.do(p); err != nil {
					t.Fatal(err)
				}
			}
			if got := search(t, s, f); !slices.Equal(got, want) {
				t.Fatalf("with a damaged index: got %v, want %v", got, want)
			}
			rep, err := s.Fsck(t.Context(), false)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Clean() {
				t.Errorf("fsck after the search rebuilt the index: %+v", rep.Findings)
			}
		})
	}
}

// TestSearchIndexFsck: fsck reports a damaged index and one made from
// another log (stale), --repair rebuilds it, and reindex makes it anew.
func TestSearchIndexFsck(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	other, otherDB := storetest.New(t, spool.Options{})
	var tids, otherTids []string
	randomStore(t, rand.New(rand.NewPCG(11, 12)), s, &tids, 30)
	randomStore(t, rand.New(rand.NewPCG(13, 14)), other, &otherTids, 30)
	f := inbox.SearchFilter{Query: "of", Limit: 100}
	want := scanSearch(t, s, tids, f)
	search(t, s, f)
	search(t, other, f)

	checks := func(rep *inbox.FsckReport) []string {
		var cs []string
		for _, f := range rep.Findings {
			cs = append(cs, f.Check)
		}
		return cs
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || len(rep.Findings) > 0 {
		t.Fatalf("fsck of a fresh index: %v, %+v", err, rep)
	}

	// Stale: the index of another store, whose log differs.
	for _, p := range searchFiles(db) {
		os.Remove(p)
	}
	for _, p := range searchFiles(otherDB) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(db, "index", filepath.Base(p)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := s.Fsck(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := checks(rep); !slices.Contains(got, "stale_search_index") {
		t.Fatalf("fsck of another store's index: %v, want stale_search_index", got)
	}
	rep, err = s.Fsck(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() {
		t.Fatalf("fsck --repair left %+v", rep.Findings)
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || len(rep.Findings) > 0 {
		t.Fatalf("fsck after the repair: %v, %+v", err, rep)
	}
	if got := search(t, s, f); !slices.Equal(got, want) {
		t.Fatalf("after repair: got %v, want %v", got, want)
	}

	// Damaged.
	for _, p := range searchFiles(db) {
		os.WriteFile(p, []byte("not an index"), 0o600)
	}
	rep, err = s.Fsck(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := checks(rep); !slices.Contains(got, "damaged_search_index") {
		t.Fatalf("fsck of a damaged index: %v, want damaged_search_index", got)
	}
	if rep, err = s.Fsck(t.Context(), true); err != nil || !rep.Clean() {
		t.Fatalf("fsck --repair: %v, %+v", err, rep)
	}

	// Reindex makes it anew from the threads.
	for _, p := range searchFiles(db) {
		os.Remove(p)
	}
	if _, err := s.Reindex(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(searchFiles(db)) == 0 {
		t.Fatal("no index file after reindex")
	}
	if got := search(t, s, f); !slices.Equal(got, want) {
		t.Fatalf("after reindex: got %v, want %v", got, want)
	}
}

// TestSearchIndexConcurrent: searches in several goroutines (each with a
// Store of its own, as processes) while messages are sent; every search
// finds what was sent before it began, and the index stays readable.
func TestSearchIndexConcurrent(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	var mu sync.Mutex
	var sent []string // message ids, in order
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := spool.Open(t.Context(), db, spool.Options{})
			if err != nil {
				errs <- err
				return
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				before := slices.Clone(sent)
				mu.Unlock()
				hs, err := st.Search(t.Context(), inbox.SearchFilter{Query: "needle", Limit: inbox.MaxLimit})
				if err != nil {
					errs <- fmt.Errorf("searcher %d: %w", g, err)
					return
				}
				got := hitIDs(hs)
				for _, id := range before {
					if !slices.Contains(got, id) {
						errs <- fmt.Errorf("searcher %d: message %s sent before the search is missing", g, id)
						return
					}
				}
			}
		}()
	}
	for i := range 60 {
		r, err := s.Send(t.Context(), inbox.SendInput{From: "ann", To: "bob", Subject: fmt.Sprint("haystack ", i), Content: inbox.Content{Body: "a needle"}})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		sent = append(sent, r.Message.MessageID)
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := search(t, s, inbox.SearchFilter{Query: "needle", Limit: inbox.MaxLimit}); len(got) != 60 {
		t.Errorf("%d hits at the end, want 60", len(got))
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || len(rep.Findings) > 0 {
		t.Fatalf("fsck after concurrent searches: %v, %+v", err, rep)
	}
}

// TestSearchIndexUnsaved: where the index cannot be saved (index/ gone),
// a search still answers, from an index made for it alone.
func TestSearchIndexUnsaved(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	var tids []string
	randomStore(t, rand.New(rand.NewPCG(15, 16)), s, &tids, 30)
	f := inbox.SearchFilter{Query: "the", Limit: 9}
	want := scanSearch(t, s, tids, f)
	if err := os.RemoveAll(filepath.Join(db, "index")); err != nil {
		t.Fatal(err)
	}
	if got := search(t, s, f); !slices.Equal(got, want) {
		t.Fatalf("without index/: got %v, want %v", got, want)
	}
}

// TestSearchStable: the same store and query give the same answer every
// time, by the index and by the scan of one thread: a payload's keys are
// read sorted, and a phrase never runs from one field into the next
// (subject, summary, body, each payload key and string value).
func TestSearchStable(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	r, err := s.Send(t.Context(), inbox.SendInput{From: "ann", To: "bob", Subject: "Quarterly report", Content: inbox.Content{
		Summary: "summary closes", Body: "body opens", PayloadJSON: `{"k":"report tail","needle":"x","n":"mark two","m":"mark one"}`}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query, snippet string // snippet "": no hit
	}{
		{`"tail needle"`, ""},    // a value into the next key
		{`"closes body"`, ""},    // the summary into the body
		{`"report summary"`, ""}, // the subject into the summary
		{`"opens k"`, ""},        // the body into the payload
		{"mark", "mark one"},     // the first key's value, sorted
		{`"report tail"`, "report tail"},
		{`quarterly "mark two"`, "Quarterly report"},
	} {
		for _, thread := range []string{"", r.Thread.ThreadID} {
			for i := range 50 {
				hs, err := s.Search(t.Context(), inbox.SearchFilter{Query: c.query, ThreadID: thread})
				if err != nil {
					t.Fatal(err)
				}
				var got string
				if len(hs) > 0 {
					got = hs[0].Snippet
				}
				if len(hs) > 1 || got != c.snippet {
					t.Fatalf("%s (thread %q), search %d: %d hits, snippet %q; want snippet %q", c.query, thread, i+1, len(hs), got, c.snippet)
				}
			}
		}
	}
}

// countdownCtx is a context that ends (context.Canceled) at the n-th call
// of its Err, as if cancelled while the search was under way.
type countdownCtx struct {
	context.Context
	mu   sync.Mutex
	n    int
	done chan struct{}
}

func newCountdown(n int) *countdownCtx {
	return &countdownCtx{Context: context.Background(), n: n, done: make(chan struct{})}
}

func (c *countdownCtx) Done() <-chan struct{} { return c.done }

func (c *countdownCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n > 0 {
		if c.n--; c.n == 0 {
			close(c.done)
		}
	}
	if c.n == 0 {
		return context.Canceled
	}
	return nil
}

// TestSearchStopsWithContext: a search whose context has ended, or ends
// while it reads the candidates, stops with an error that wraps the
// context's, by the index, by the scan of one thread, while the index is
// rebuilt and while it catches up.
func TestSearchStopsWithContext(t *testing.T) {
	s, db := storetest.New(t, spool.Options{})
	r, err := s.Send(t.Context(), inbox.SendInput{From: "ann", To: "bob", Subject: "haystack", Content: inbox.Content{Body: "a needle"}})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	for range 300 {
		if _, err := s.Reply(t.Context(), "bob", "ann", tid, inbox.KindProgress, inbox.Content{Body: "another needle"}); err != nil {
			t.Fatal(err)
		}
	}
	all := inbox.SearchFilter{Query: "needle", Limit: inbox.MaxLimit}
	if got := search(t, s, all); len(got) != 301 {
		t.Fatalf("%d hits, want 301", len(got))
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	stops := func(what string, ctx context.Context, f inbox.SearchFilter) {
		t.Helper()
		hs, err := s.Search(ctx, f)
		if !errors.Is(err, context.Canceled) || hs != nil {
			t.Errorf("%s: %d hits, error %v; want none and context.Canceled", what, len(hs), err)
		}
	}
	stops("by the index", cancelled, all)
	stops("by the index, cancelled under way", newCountdown(3), all)
	one := all
	one.ThreadID = tid
	stops("one thread", cancelled, one)
	stops("one thread, cancelled under way", newCountdown(3), one)
	if _, err := s.Reply(t.Context(), "bob", "ann", tid, inbox.KindProgress, inbox.Content{Body: "a last needle"}); err != nil {
		t.Fatal(err)
	}
	stops("catching up", cancelled, all)
	for _, p := range searchFiles(db) {
		os.Remove(p)
	}
	stops("rebuilding", cancelled, all)
	if got := search(t, s, all); len(got) != 302 {
		t.Fatalf("after the stopped searches: %d hits, want 302", len(got))
	}
}
