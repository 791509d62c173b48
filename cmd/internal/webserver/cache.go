package webserver

import (
	"container/list"
	"context"
	"net/http"
	"sync"
	"time"
)

// cache keeps the last answer of each read (an endpoint and its
// parameters, in their canonical form: canonicalArgs) with the event id
// the store had when it was computed. While no event has come since, the
// answer stands: ten pages that fetch the same view after one change cost
// one computation, not ten, and a page opened on a quiet store of 100,000
// threads gets the agents (which read every mailbox) and the wait graph at
// once. What the event log does not record (a process starting or ending
// a wait, a lease running out) is caught by a computation in the
// background once an answer is older than refreshAfter, which the next
// fetch gets.
//
// A computation serves the callers that wait for it and stops when the
// last of them has gone (a client that left costs nothing more); one in
// the background runs under refreshBound. The answers kept weigh at most
// maxBytes, the least recently used dropped first; one heavier than
// maxBytes/maxFraction is served, not kept.
type cache struct {
	// base ends every computation when the server stops.
	base   context.Context
	events func(context.Context) (int64, error)
	// maxBytes bounds the answers kept (a test lowers it).
	maxBytes int

	mu sync.Mutex
	m  map[string]*cached
	// lru holds the entries with an answer, the most recently used first;
	// bytes is the weight of their answers.
	lru   list.List
	bytes int
	// gen counts invalidations: a computation that began before one is
	// returned to its callers but not kept.
	gen int
}

const (
	// refreshAfter is how old an answer may be before a fetch that gets
	// it starts a new computation.
	refreshAfter = 2 * time.Second
	// refreshBound bounds a computation no caller waits for.
	refreshBound = time.Minute
	// defaultMaxBytes bounds the answers kept: eight variants of one
	// 58 MiB thread once took 915 MB.
	defaultMaxBytes = 64 << 20
	// maxFraction: an answer heavier than maxBytes/maxFraction is not kept.
	maxFraction = 4
	// maxCached bounds the entries (each search and thread is one).
	maxCached = 512
)

type cached struct {
	key    string
	id     int64 // the store's last event id before it was computed
	at     time.Time
	status int
	body   []byte        // nil until a computation succeeds
	el     *list.Element // in c.lru while body is kept
	// running is the computation under way, if any.
	running *computation
}

// computation is one run of an endpoint: done is closed when status and
// body are set.
type computation struct {
	id     int64
	gen    int
	done   chan struct{}
	status int
	body   []byte
	cancel context.CancelFunc
	// waiters is how many callers wait for it (c.mu held); background
	// says none started it, so it runs on when none is left.
	waiters    int
	background bool
}

func newCache(base context.Context, events func(context.Context) (int64, error)) *cache {
	return &cache{base: base, events: events, maxBytes: defaultMaxBytes, m: map[string]*cached{}}
}

// get answers key from the cache while no event came since its answer,
// else from compute: one computation at a time per key, which the other
// callers wait for. A failure is returned, not kept. A caller whose ctx
// ends gets 503 (it is gone).
func (c *cache) get(ctx context.Context, key string, compute func(context.Context) (int, []byte)) (int, []byte) {
	for try := 0; ; try++ {
		id, err := c.events(ctx)
		if err != nil {
			return compute(ctx)
		}
		c.mu.Lock()
		e := c.m[key]
		if e == nil {
			if len(c.m) >= maxCached {
				c.evictEntries()
			}
			e = &cached{key: key}
			c.m[key] = e
		}
		if e.body != nil && e.id == id {
			c.lru.MoveToFront(e.el)
			status, body := e.status, e.body
			if time.Since(e.at) > refreshAfter && e.running == nil {
				c.start(e, id, compute, true)
			}
			c.mu.Unlock()
			return status, body
		}
		r := e.running
		if r == nil {
			r = c.start(e, id, compute, false)
		}
		r.waiters++
		gen := c.gen
		c.mu.Unlock()
		select {
		case <-r.done:
			c.mu.Lock()
			r.waiters--
			c.mu.Unlock()
		case <-ctx.Done():
			c.leave(e, r)
			return http.StatusServiceUnavailable, nil
		}
		// A computation that began before what this caller knows of (an
		// event, an invalidation) is followed by one more; then the answer
		// is what it is.
		if (r.id >= id && r.gen == gen) || try > 0 {
			return r.status, r.body
		}
	}
}

// leave is a caller of r giving up: the last one stops it (unless it runs
// in the background), and the next caller starts another.
func (c *cache) leave(e *cached, r *computation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.waiters--
	if r.waiters > 0 || r.background {
		return
	}
	if e.running == r {
		e.running = nil
	}
	r.cancel()
}

// invalidate makes every answer stale (for what the event log does not
// record: a wait started or ended), so the next caller computes it.
func (c *cache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, e := range c.m {
		e.id = -1
	}
}

// evictEntries makes room for an entry (c.mu held): the entries with no
// answer and no computation go, then the least recently used answers not
// being computed, down to three quarters of maxCached.
func (c *cache) evictEntries() {
	for k, e := range c.m {
		if e.body == nil && e.running == nil {
			delete(c.m, k)
		}
	}
	for el := c.lru.Back(); el != nil && len(c.m) > maxCached*3/4; {
		prev := el.Prev()
		if e := el.Value.(*cached); e.running == nil {
			c.drop(e)
			delete(c.m, e.key)
		}
		el = prev
	}
}

// keep makes body e's answer (c.mu held), if it is light enough, and
// drops the least recently used answers until the rest weigh at most
// maxBytes.
func (c *cache) keep(e *cached, id int64, status int, body []byte) {
	c.drop(e)
	if len(body) > c.maxBytes/maxFraction {
		return
	}
	e.id, e.at, e.status, e.body = id, time.Now(), status, body
	e.el = c.lru.PushFront(e)
	c.bytes += len(body)
	for c.bytes > c.maxBytes {
		c.drop(c.lru.Back().Value.(*cached))
	}
}

// drop forgets e's answer (c.mu held); the entry stays, for a
// computation under way.
func (c *cache) drop(e *cached) {
	if e.el == nil {
		return
	}
	c.lru.Remove(e.el)
	c.bytes -= len(e.body)
	e.el, e.body = nil, nil
}

// start computes in the background (c.mu held); the answer is good for
// event id, read before the computation began. A background one runs
// under refreshBound; any other until its last caller leaves.
func (c *cache) start(e *cached, id int64, compute func(context.Context) (int, []byte), background bool) *computation {
	var ctx context.Context
	var cancel context.CancelFunc
	if background {
		ctx, cancel = context.WithTimeout(c.base, refreshBound)
	} else {
		ctx, cancel = context.WithCancel(c.base)
	}
	r := &computation{id: id, gen: c.gen, done: make(chan struct{}), cancel: cancel, background: background}
	e.running = r
	go func() {
		status, body := compute(ctx)
		stopped := ctx.Err() != nil
		cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		r.status, r.body = status, body
		if !stopped && status == http.StatusOK && r.gen == c.gen && r.id >= e.id {
			c.keep(e, r.id, status, body)
		}
		if e.running == r {
			e.running = nil
		}
		close(r.done)
	}()
	return r
}

// keptBytes is the weight of the answers kept.
func (c *cache) keptBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// kept reports whether key has an answer kept.
func (c *cache) kept(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	return e != nil && e.body != nil
}

// waiters is how many callers wait for key's computation.
func (c *cache) waiters(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil && e.running != nil {
		return e.running.waiters
	}
	return 0
}

// entries is how many answers are kept for keys starting with cmd and a
// NUL (cachedRun's keys).
func (c *cache) entries(cmd string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, e := range c.m {
		if e.body != nil && len(k) > len(cmd) && k[:len(cmd)+1] == cmd+"\x00" {
			n++
		}
	}
	return n
}
