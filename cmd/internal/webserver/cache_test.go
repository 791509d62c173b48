package webserver

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/testproc"
)

// TestInProcessCacheStopsWhenNobodyWaits: a computation several callers
// share goes on while one of them is left, and is cancelled once none is
// (the client went away: its search, its thread, stop costing a core);
// the next caller starts a new one.
func TestInProcessCacheStopsWhenNobodyWaits(t *testing.T) {
	c := newCache(context.Background(), func(context.Context) (int64, error) { return 1, nil })
	started := make(chan struct{}, 10)
	stopped := make(chan struct{}, 10)
	release := make(chan struct{})
	compute := func(ctx context.Context) (int, []byte) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			stopped <- struct{}{}
			return http.StatusServiceUnavailable, nil
		case <-release:
			return 200, []byte("done")
		}
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, ctx := range []context.Context{ctx1, ctx2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b := c.get(ctx, "k", compute)
			results[i] = strconv.Itoa(st) + " " + string(b)
		}()
	}
	<-started
	// Both callers wait on the one computation before the first leaves.
	testproc.Eventually(t, 20*time.Second, "both callers on the computation", func() bool { return c.waiters("k") == 2 })
	cancel1()
	testproc.Eventually(t, 20*time.Second, "the first caller to leave", func() bool { return c.waiters("k") == 1 })
	select {
	case <-stopped:
		t.Fatal("the computation stopped while a caller still waited for it")
	default:
	}
	cancel2()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the computation went on 20 s after its last caller left")
	}
	wg.Wait()
	if results[0] != "503 " || results[1] != "503 " {
		t.Errorf("callers that left got %q", results)
	}
	// The next caller computes anew (the stopped one is not its answer).
	close(release)
	if st, b := c.get(context.Background(), "k", compute); st != 200 || string(b) != "done" {
		t.Errorf("after the stopped computation: %d %s", st, b)
	}
}

// TestInProcessCacheBoundedByBytes: the answers kept never weigh more
// than the bound; the least recently used go first; one bigger than a
// fraction of the bound is served but not kept.
func TestInProcessCacheBoundedByBytes(t *testing.T) {
	c := newCache(context.Background(), func(context.Context) (int64, error) { return 1, nil })
	c.maxBytes = 1 << 20
	body := func(n int, fill byte) func(context.Context) (int, []byte) {
		return func(context.Context) (int, []byte) { return 200, []byte(strings.Repeat(string(fill), n)) }
	}
	for i := range 20 {
		c.get(context.Background(), "k"+strconv.Itoa(i), body(100<<10, 'a'))
		if c.keptBytes() > c.maxBytes {
			t.Fatalf("after %d answers of 100 KiB: %d bytes kept, bound %d", i+1, c.keptBytes(), c.maxBytes)
		}
		// k0 is asked again each time: it is the most recently used.
		if _, b := c.get(context.Background(), "k0", body(1, 'x')); len(b) != 100<<10 {
			t.Fatalf("k0, used at every step, was dropped (got %d bytes)", len(b))
		}
	}
	if _, b := c.get(context.Background(), "k1", body(1, 'x')); len(b) != 1 {
		t.Errorf("k1, the least recently used, is still kept")
	}
	big := body(c.maxBytes/maxFraction+1, 'b')
	if _, b := c.get(context.Background(), "big", big); len(b) != c.maxBytes/maxFraction+1 {
		t.Fatalf("the big answer was not served")
	}
	if c.kept("big") {
		t.Errorf("an answer bigger than 1/%d of the bound was kept", maxFraction)
	}
}

// TestInProcessCacheKeyIsTheRequest: the query-string variants of one
// request (parameter spellings, order, values written otherwise, a
// default given) are one answer in the cache: eight variants of one big
// thread keep one copy.
func TestInProcessCacheKeyIsTheRequest(t *testing.T) {
	st, ts, s := inProcess(t)
	ctx := context.Background()
	res, err := st.Send(ctx, inbox.SendInput{From: "lead", To: "w1", Subject: "big", Content: inbox.Content{Body: strings.Repeat("x", 500<<10)}})
	if err != nil {
		t.Fatal(err)
	}
	tid := res.Thread.ThreadID
	for range 5 {
		if _, err := st.Send(ctx, inbox.SendInput{From: "lead", ThreadID: tid, Content: inbox.Content{Body: strings.Repeat("y", 500<<10)}}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string) []byte {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return b
	}
	var size int
	for _, q := range []string{"", "?max_body_bytes=0", "?max-body-bytes=0", "?max_body_bytes=00", "?max_body_bytes=%2B0",
		"?max_body_bytes=0x0", "?max-body-bytes=0&max_body_bytes=0", "?max_body_bytes=000"} {
		size = len(get("/api/threads/" + tid + q))
	}
	if size < 3_000_000 {
		t.Fatalf("the thread's answer is %d bytes: not the big thread", size)
	}
	t.Logf("8 variants of one %d-byte thread: %d bytes kept", size, s.cache.keptBytes())
	if kept := s.cache.keptBytes(); kept > size+size/2 {
		t.Errorf("8 variants of one %d-byte thread keep %d bytes: more than one copy", size, kept)
	}
	// And the order of parameters, the two spellings and a status list
	// written either way are one request.
	for _, q := range []string{"?status=done,blocked&limit=5", "?limit=5&status=blocked&status=done", "?status=blocked,done,done&limit=05"} {
		get("/api/threads" + q)
	}
	if n := s.cache.entries("list"); n != 1 {
		t.Errorf("3 variants of one list request: %d answers kept", n)
	}
}
