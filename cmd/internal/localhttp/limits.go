package localhttp

import (
	"container/list"
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// What one connection may hold of a server, whoever opened it: a local
// user without the token must not be able to take the server from its
// owner by opening connections and leaving them idle.
const (
	// ReadHeaderTimeout bounds the reading of a request's header.
	ReadHeaderTimeout = 10 * time.Second
	// BodyTimeout bounds the reading of a request, its body included
	// (the server's ReadTimeout: once the body is read, net/http lifts
	// the deadline, so a long answer, a stream, is not cut by it).
	BodyTimeout = 30 * time.Second
	// IdleTimeout closes a keep-alive connection that carries no request
	// for this long.
	IdleTimeout = 60 * time.Second
	// MaxHeaderBytes bounds a request's header.
	MaxHeaderBytes = 64 << 10
	// MaxConns bounds the connections open at once. At the bound a new
	// connection closes the oldest one that has never carried an
	// authorized request (else the oldest idle one, else the new one
	// itself): the owner, whose requests carry the token, always gets in.
	MaxConns = 1024
	// shutdownGrace is how long Serve lets open requests finish once its
	// context ends.
	shutdownGrace = 2 * time.Second
)

// bodyTimeout is BodyTimeout, shortened by the tests.
var bodyTimeout = BodyTimeout

// NewServer is an HTTP server for h held to the limits above. A response
// closes its connection unless the handler called Authorized or
// KeepAlive for its request: a request refused (401, 403) does not keep
// a connection open.
func NewServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           limitRequest(h),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       bodyTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          errorLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if lc, ok := c.(*conn); ok {
				lc.setIdle(st == http.StateIdle)
			}
		},
	}
}

// Serve serves srv (made by NewServer) on ln, with at most MaxConns
// connections open, until ctx ends; then it shuts srv down, giving the
// requests under way a moment to end.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err := srv.Serve(newLimitListener(ln, MaxConns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

type connKey struct{}

type requestKey struct{}

// request is what limitRequest keeps of a request under way: its
// response's header (where Connection: close waits to be lifted) and its
// connection.
type request struct {
	header http.Header
	conn   *conn
}

// limitRequest marks every response Connection: close until the handler
// says otherwise.
func limitRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		rq := &request{header: w.Header()}
		rq.conn, _ = r.Context().Value(connKey{}).(*conn)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, rq)))
	})
}

// Authorized says that r carried the server's credential: its connection
// stays open for the next request, and is no longer one a newcomer may
// close at the bound.
func Authorized(r *http.Request) {
	rq, _ := r.Context().Value(requestKey{}).(*request)
	if rq == nil {
		return
	}
	rq.header.Del("Connection")
	if rq.conn != nil {
		rq.conn.trust()
	}
}

// KeepAlive lets r's connection serve another request, without making it
// one a newcomer may not close (r was served, though not with the token).
func KeepAlive(r *http.Request) {
	if rq, _ := r.Context().Value(requestKey{}).(*request); rq != nil {
		rq.header.Del("Connection")
	}
}

// limitListener keeps at most max connections open.
type limitListener struct {
	net.Listener
	max int

	mu sync.Mutex
	// conns are the open connections, oldest first.
	conns list.List
}

func newLimitListener(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, max: max}
}

// conn is one connection of a limitListener.
type conn struct {
	net.Conn
	l *limitListener
	// Under l.mu: el is the connection's place in l.conns (nil once
	// closed); trusted says it carried an authorized request; idle that
	// it is between requests.
	el      *list.Element
	trusted bool
	idle    bool
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim *conn
		if l.conns.Len() >= l.max {
			if victim = l.victim(); victim == nil {
				l.mu.Unlock()
				nc.Close() // every connection is the owner's, and busy
				continue
			}
			l.conns.Remove(victim.el)
			victim.el = nil
		}
		c := &conn{Conn: nc, l: l}
		c.el = l.conns.PushBack(c)
		l.mu.Unlock()
		if victim != nil {
			victim.Conn.Close()
		}
		return c, nil
	}
}

// victim is the connection a newcomer closes at the bound (l.mu held):
// the oldest that never carried an authorized request, else the oldest
// idle one, else none.
func (l *limitListener) victim() *conn {
	var idle *conn
	for e := l.conns.Front(); e != nil; e = e.Next() {
		c := e.Value.(*conn)
		if !c.trusted {
			return c
		}
		if idle == nil && c.idle {
			idle = c
		}
	}
	return idle
}

// open is how many connections are open.
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns.Len()
}

func (c *conn) Close() error {
	c.l.mu.Lock()
	if c.el != nil {
		c.l.conns.Remove(c.el)
		c.el = nil
	}
	c.l.mu.Unlock()
	return c.Conn.Close()
}

func (c *conn) trust() {
	c.l.mu.Lock()
	c.trusted = true
	c.l.mu.Unlock()
}

func (c *conn) setIdle(idle bool) {
	c.l.mu.Lock()
	c.idle = idle
	c.l.mu.Unlock()
}
