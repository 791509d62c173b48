package localhttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// limited serves a handler held to NewServer's limits on a listener of at
// most max connections: a request with "Authorization: ok" is authorized,
// GET /keep is kept alive without the token, anything else is 401; POST
// /body reads its body and then waits, answering "cancelled" if its
// context ends within wait, else "whole".
func limited(t *testing.T, max int, wait time.Duration) (addr string, l *limitListener) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") == "ok" && r.URL.Path == "/body":
			Authorized(r)
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
				return
			}
			select {
			case <-r.Context().Done():
				io.WriteString(w, "cancelled")
			case <-time.After(wait):
				io.WriteString(w, "whole")
			}
		case r.Header.Get("Authorization") == "ok":
			Authorized(r)
			io.WriteString(w, "ok")
		case r.URL.Path == "/keep":
			KeepAlive(r)
			io.WriteString(w, "kept")
		default:
			http.Error(w, "no", http.StatusUnauthorized)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, nil)
	l = newLimitListener(ln, max)
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), l
}

// rawConn is one client connection, sending requests by hand.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// get sends GET path (with "Authorization: ok" when auth) and reads the
// response.
func (rc *rawConn) get(path string, auth bool) (*http.Response, string) {
	rc.t.Helper()
	req, _ := http.NewRequest("GET", "http://x"+path, nil)
	if auth {
		req.Header.Set("Authorization", "ok")
	}
	if err := req.Write(rc.c); err != nil {
		rc.t.Fatal(err)
	}
	return rc.read(req)
}

func (rc *rawConn) read(req *http.Request) (*http.Response, string) {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(rc.br, req)
	if err != nil {
		rc.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// closed reports whether the server closed the connection (a read ends
// with EOF or a reset; a timeout means it is still open).
func (rc *rawConn) closed(within time.Duration) bool {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(within))
	_, err := rc.br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// TestRefusedConnectionCloses: a request the handler neither authorized
// nor kept alive is answered with Connection: close and its connection
// closed; an authorized one, or one kept alive, keeps it open.
func TestRefusedConnectionCloses(t *testing.T) {
	addr, _ := limited(t, 16, 0)
	refused := dial(t, addr)
	if resp, _ := refused.get("/", false); resp.StatusCode != 401 || !resp.Close {
		t.Errorf("a refused request: %d, Connection %q; want 401 and close", resp.StatusCode, resp.Header.Get("Connection"))
	}
	if !refused.closed(20 * time.Second) {
		t.Error("the connection of a refused request is still open")
	}
	for _, c := range []struct {
		path string
		auth bool
	}{{"/", true}, {"/keep", false}} {
		rc := dial(t, addr)
		for i := range 2 {
			if resp, body := rc.get(c.path, c.auth); resp.StatusCode != 200 || resp.Close {
				t.Errorf("GET %s (token %v), request %d on the connection: %d %q, Connection %q", c.path, c.auth, i+1, resp.StatusCode, body, resp.Header.Get("Connection"))
			}
		}
	}
}

// TestNewcomerClosesUntrusted: at the bound, a new connection closes the
// oldest one that never carried an authorized request, not the owner's
// (older still); when every one is the owner's, the oldest idle one.
func TestNewcomerClosesUntrusted(t *testing.T) {
	addr, l := limited(t, 4, 0)
	owner := dial(t, addr)
	if resp, _ := owner.get("/", true); resp.StatusCode != 200 {
		t.Fatalf("the owner's request: %d", resp.StatusCode)
	}
	var silent []*rawConn
	for range 3 {
		silent = append(silent, dial(t, addr))
	}
	kept := dial(t, addr) // the fifth: the first silent one must go
	if !silent[0].closed(20 * time.Second) {
		t.Fatal("at the bound, the oldest connection without the token is still open")
	}
	if resp, body := kept.get("/keep", false); resp.StatusCode != 200 {
		t.Errorf("the newcomer: %d %s", resp.StatusCode, body)
	}
	if resp, body := owner.get("/", true); resp.StatusCode != 200 {
		t.Errorf("the owner's connection after the newcomer: %d %s", resp.StatusCode, body)
	}
	if n := l.open(); n > 4 {
		t.Errorf("%d connections open, bound 4", n)
	}
	// Now every connection is the owner's: the oldest idle one gives way.
	for _, rc := range append(silent[1:], kept) {
		if resp, _ := rc.get("/", true); resp.StatusCode != 200 {
			t.Fatalf("authorizing a connection: %d", resp.StatusCode)
		}
	}
	late := dial(t, addr)
	if resp, body := late.get("/", true); resp.StatusCode != 200 {
		t.Errorf("a new owner's connection at the bound: %d %s", resp.StatusCode, body)
	}
	if !owner.closed(20 * time.Second) {
		t.Error("at the bound with every connection the owner's, the oldest idle one is still open")
	}
}

// TestBodyTimeout: a body that does not come within the body timeout
// fails the request; once read, the deadline is lifted, so a long
// response (a stream, a wait) is not ended by it.
func TestBodyTimeout(t *testing.T) {
	defer func(d time.Duration) { bodyTimeout = d }(bodyTimeout)
	bodyTimeout = 100 * time.Millisecond
	addr, _ := limited(t, 16, 10*bodyTimeout)
	rc := dial(t, addr)
	io.WriteString(rc.c, "POST /body HTTP/1.1\r\nHost: x\r\nAuthorization: ok\r\nContent-Length: 10\r\n\r\nhalf")
	req, _ := http.NewRequest("POST", "http://x/body", nil)
	if resp, body := rc.read(req); resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "timeout") {
		t.Errorf("a body that stops half way: %d %q, want the handler's read to time out", resp.StatusCode, body)
	}
	rc = dial(t, addr)
	io.WriteString(rc.c, "POST /body HTTP/1.1\r\nHost: x\r\nAuthorization: ok\r\nContent-Length: 5\r\n\r\nwhole")
	if resp, body := rc.read(req); resp.StatusCode != 200 || body != "whole" {
		t.Errorf("a long answer after the whole body: %d %q, want 200 whole (its context not ended by the body's deadline)", resp.StatusCode, body)
	}
}

// TestServeShutsDown: Serve returns nil once its context ends.
func TestServeShutsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, NewServer(http.NotFoundHandler(), nil), ln) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return within 20 s of its context's end")
	}
}
