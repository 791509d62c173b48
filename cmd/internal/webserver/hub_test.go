package webserver

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// inProcess serves the dashboard of a new directory store from this
// process (for the race detector: the hub and the streams share memory).
func inProcess(t *testing.T) (*spool.Store, *httptest.Server, *server) {
	t.Helper()
	st, db := storetest.New(t, spool.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(ctx, cli.WebConfig{Bus: st, DB: db}, ln.Addr().(*net.TCPAddr).Port, "secret")
	go s.hub.run(ctx)
	ts := httptest.NewUnstartedServer(s.handler())
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(func() { cancel(); s.hub.close(); ts.Close() })
	return st, ts, s
}

// TestInProcessStreams opens several streams at once while
// writers send, and checks that each stream gets every event once, in
// order, from where it started.
func TestInProcessStreams(t *testing.T) {
	st, ts, _ := inProcess(t)
	ctx := context.Background()
	const streams, sends = 5, 30
	var wg sync.WaitGroup
	got := make([][]int64, streams)
	ready := make(chan struct{}, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", ts.URL+"/api/events?after_event=0", nil)
			req.Header.Set("Authorization", "Bearer secret")
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				ready <- struct{}{}
				return
			}
			defer resp.Body.Close()
			ready <- struct{}{}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
					n, _ := strconv.ParseInt(id, 10, 64)
					got[i] = append(got[i], n)
					if len(got[i]) == sends {
						return
					}
				}
			}
		}()
	}
	for range streams {
		<-ready
	}
	for range sends {
		if _, err := st.Send(ctx, inbox.SendInput{From: "lead", To: "w1", Subject: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("streams did not get every event within 30 s")
	}
	for i, ids := range got {
		for j, id := range ids {
			if id != int64(j+1) {
				t.Fatalf("stream %d: events %v, want 1..%d in order", i, ids, sends)
			}
		}
	}
}

// TestInProcessSlowStreamIsDropped: a stream that falls a whole queue behind is
// closed (its page resumes from the log), and the others go on.
func TestInProcessSlowStreamIsDropped(t *testing.T) {
	h := newHub(nil)
	slow, fast := h.subscribe(), h.subscribe()
	for i := range subQueue + 1 {
		h.publish(&inbox.Event{EventID: int64(i + 1)})
		<-fast.ch
	}
	n := 0
	for range slow.ch {
		n++
	}
	if n != subQueue {
		t.Errorf("the slow stream got %d events before it was closed, want %d", n, subQueue)
	}
	h.publish(&inbox.Event{EventID: subQueue + 2})
	if ev := <-fast.ch; ev.EventID != subQueue+2 {
		t.Errorf("the fast stream got %d", ev.EventID)
	}
	h.unsubscribe(slow) // closed already: a no-op
	h.close()
	if _, ok := <-fast.ch; ok {
		t.Error("close left a stream open")
	}
	if h.subscribe() != nil {
		t.Error("a closed hub took a subscription")
	}
}

// TestInProcessGuard checks the guard's rules without a process.
func TestInProcessGuard(t *testing.T) {
	_, ts, s := inProcess(t)
	port := strconv.Itoa(s.port)
	for _, c := range []struct {
		host, origin, auth string
		want               int
	}{
		{"127.0.0.1:" + port, "", "Bearer secret", 200},
		{"localhost:" + port, "http://localhost:" + port, "Bearer secret", 200},
		{"[::1]:" + port, "", "Bearer secret", 200},
		{"127.0.0.1:" + port, "", "", 401},
		{"127.0.0.1:" + port, "", "Bearer nope", 401},
		{"127.0.0.1:" + port, "", "Basic secret", 401},
		{"evil.example:" + port, "", "Bearer secret", 403},
		{"127.0.0.1", "", "Bearer secret", 403},
		{"127.0.0.1:" + port, "http://evil.example", "Bearer secret", 403},
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port + "/x", "Bearer secret", 403},
	} {
		req, _ := http.NewRequest("GET", ts.URL+"/api/info", nil)
		req.Host = c.host
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Host %q Origin %q Authorization %q: %d, want %d", c.host, c.origin, c.auth, resp.StatusCode, c.want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); c.want == 200 && !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("no content security policy: %q", csp)
		}
	}
}

// TestInProcessStatusOf maps every exit code the API can meet.
func TestInProcessStatusOf(t *testing.T) {
	for code, want := range map[int]int{0: 200, 10: 200, 20: 409, 30: 400, 40: 404, 50: 500, 130: 500} {
		if got := statusOf(code); got != want {
			t.Errorf("statusOf(%d) = %d, want %d", code, got, want)
		}
	}
}

// TestInProcessCache: callers at one event id share one computation; a
// new event makes the next caller compute again; a failure is not kept.
func TestInProcessCache(t *testing.T) {
	var mu sync.Mutex
	id, computed := int64(1), 0
	c := newCache(context.Background(), func(context.Context) (int64, error) { mu.Lock(); defer mu.Unlock(); return id, nil })
	release := make(chan struct{})
	status := 200
	compute := func(context.Context) (int, []byte) {
		<-release
		mu.Lock()
		defer mu.Unlock()
		computed++
		return status, []byte(strconv.Itoa(computed))
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, b := c.get(context.Background(), "k", compute); st != 200 || string(b) != "1" {
				t.Errorf("a caller got %d %s, want the one computation's 200 1", st, b)
			}
		}()
	}
	close(release) // every caller is either waiting for the computation or yet to come: all get its answer
	wg.Wait()
	if _, b := c.get(context.Background(), "k", compute); string(b) != "1" || computed != 1 {
		t.Errorf("at the same event id: %s after %d computations", b, computed)
	}
	mu.Lock()
	id, status = 2, 500
	mu.Unlock()
	if st, _ := c.get(context.Background(), "k", compute); st != 500 {
		t.Errorf("a new event: %d, want the new computation's 500", st)
	}
	mu.Lock()
	status = 200
	mu.Unlock()
	if st, b := c.get(context.Background(), "k", compute); st != 200 || string(b) != "3" {
		t.Errorf("after a failure: %d %s, want a new computation", st, b)
	}
}
