package webserver

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// cache keeps the last answer of each read (an endpoint and its
// parameters) with the event id the store had when it was computed.
// While no event has come since, the answer stands: ten pages that fetch
// the same view after one change cost one computation, not ten, and a
// page opened on a quiet store of 100,000 threads gets the agents (which
// read every mailbox) and the wait graph at once. What the
// event log does not record (a process starting or ending a wait, a lease
// running out) is caught by a computation in the background once an
// answer is older than refreshAfter, which the next fetch gets.
type cache struct {
	events func(context.Context) (int64, error)
	mu     sync.Mutex
	m      map[string]*cached
	// gen counts invalidations: a computation that began before one is
	// returned to its callers but not kept.
	gen int
}

// refreshAfter is how old an answer may be before a fetch that gets it
// starts a new computation.
const refreshAfter = 2 * time.Second

type cached struct {
	id     int64 // the store's last event id before it was computed
	at     time.Time
	status int
	body   []byte // nil until a computation succeeds
	// running is the computation under way, if any.
	running *computation
}

// computation is one run of an endpoint: done is closed when status and body are set.
type computation struct {
	id     int64
	gen    int
	done   chan struct{}
	status int
	body   []byte
}

func newCache(events func(context.Context) (int64, error)) *cache {
	return &cache{events: events, m: map[string]*cached{}}
}

// get answers key from the cache while no event came since its answer,
// else from compute: one computation at a time per key, which the other
// callers wait for. A failure is returned, not kept.
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
				c.evict()
			}
			e = &cached{}
			c.m[key] = e
		}
		if e.body != nil && e.id == id {
			status, body := e.status, e.body
			if time.Since(e.at) > refreshAfter && e.running == nil {
				c.start(e, id, compute)
			}
			c.mu.Unlock()
			return status, body
		}
		r := e.running
		if r == nil {
			r = c.start(e, id, compute)
		}
		gen := c.gen
		c.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
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

// maxCached bounds the answers kept (each search and thread is one).
const maxCached = 512

// evict forgets every answer not being computed (c.mu held): the store
// moved on since most of them anyway.
func (c *cache) evict() {
	for k, e := range c.m {
		if e.running == nil {
			delete(c.m, k)
		}
	}
}

// start computes in the background (c.mu held); the answer is good for
// event id, read before the computation began.
func (c *cache) start(e *cached, id int64, compute func(context.Context) (int, []byte)) *computation {
	r := &computation{id: id, gen: c.gen, done: make(chan struct{})}
	e.running = r
	go func() {
		r.status, r.body = compute(context.Background())
		c.mu.Lock()
		defer c.mu.Unlock()
		if r.status == http.StatusOK && r.gen == c.gen && r.id >= e.id {
			e.id, e.at, e.status, e.body = r.id, time.Now(), r.status, r.body
		}
		e.running = nil
		close(r.done)
	}()
	return r
}
