package webserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inbox-dev/inbox"
)

// hub follows the event log once for the whole server and hands every
// event to each open stream: ten pages open cost the writers one reader
// of the log, not ten.
type hub struct {
	bus inbox.Bus
	mu  sync.Mutex
	// subs are the open streams; closed once the server stops.
	subs   map[*sub]struct{}
	closed bool
	// feed, when set, is given each event after the streams are (the
	// attention tracker reads its message there, once for every page).
	feed func(*inbox.Event)
}

// sub is one open stream's queue. A stream that falls more than its
// queue's length behind is dropped (ch closed): its page reconnects with
// its last event id and catches up from the log.
type sub struct {
	ch chan *inbox.Event
}

// subQueue is how many events a stream may fall behind.
const subQueue = 4096

func newHub(bus inbox.Bus) *hub { return &hub{bus: bus, subs: map[*sub]struct{}{}} }

// run follows the log from its end until ctx ends, retrying after a
// failure (a NATS server gone for a while).
func (h *hub) run(ctx context.Context) {
	var pos int64 = -1
	for ctx.Err() == nil {
		if pos < 0 {
			last, err := h.bus.LastEventID(ctx)
			if err != nil {
				sleep(ctx, time.Second)
				continue
			}
			pos = last
		}
		err := h.bus.Follow(ctx, pos, "", inbox.WaitOptions{}, func(ev *inbox.Event) bool {
			pos = ev.EventID
			h.publish(ev)
			if h.feed != nil {
				h.feed(ev)
			}
			return true
		})
		if err != nil && ctx.Err() == nil {
			sleep(ctx, time.Second)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (h *hub) publish(ev *inbox.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.ch <- ev:
		default:
			delete(h.subs, s)
			close(s.ch)
		}
	}
}

// presenceEvent is the marker a stream's queue carries for a change of
// presence (a wait started or ended): sent to pages as an SSE event of
// type presence, without an id, since the log has no event for it.
var presenceEvent = &inbox.Event{EventType: "presence"}

// presence tells every stream that a wait started or ended.
func (h *hub) presence() { h.publish(presenceEvent) }

// subscribe opens a queue; nil once the server stops.
func (h *hub) subscribe() *sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	s := &sub{ch: make(chan *inbox.Event, subQueue)}
	h.subs[s] = struct{}{}
	return s
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
}

// close ends every stream, so that the server can shut down.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.ch)
	}
}

// A stream that wrote burstWrites times in the last burstWindow is in a
// burst: it gathers events for burstGap before it writes. Slower than
// that, every event goes out at once.
const (
	burstWrites = 5
	burstWindow = 200 * time.Millisecond
	burstGap    = 100 * time.Millisecond
)

// keepAlive is how often an idle stream gets a comment line, so that a
// connection nothing is sent on is not taken for dead.
const keepAlive = 20 * time.Second

// events serves GET /api/events: to an EventSource (Accept:
// text/event-stream) the live stream, each event with its event_id as
// its id, resuming after Last-Event-ID (or ?after_event=N; else from
// now); to anything else inbox events --json (?limit, ?after_event,
// ?thread).
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.command("events", "limit", "after-event", "thread")(w, r)
		return
	}
	after, err := s.resumeAfter(r)
	if err != nil {
		writeErr(w, "events", err)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, "events", fmt.Errorf("the connection cannot stream"))
		return
	}
	// Subscribe first, then read the log up to its end: whatever the hub
	// publishes meanwhile is in the queue, so nothing falls between; what
	// both give is sent once, by id.
	sub := s.hub.subscribe()
	if sub == nil {
		return
	}
	defer s.hub.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	last := after
	var werr error
	send := func(ev *inbox.Event) bool {
		if ev == presenceEvent {
			_, werr = fmt.Fprint(w, "event: presence\ndata: {}\n\n")
			return werr == nil
		}
		if ev.EventID <= last {
			return true
		}
		b, err := json.Marshal(ev)
		if err != nil {
			werr = err
			return false
		}
		if _, werr = fmt.Fprintf(w, "id: %d\nevent: event\ndata: %s\n\n", ev.EventID, b); werr != nil {
			return false
		}
		last = ev.EventID
		return true
	}
	ctx := r.Context()
	if err := s.cfg.Bus.Events(ctx, after, send); err != nil || werr != nil {
		return
	}
	fl.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var recent []time.Time // when the writes of the last burstWindow went out
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.ch:
			if !ok {
				return // fell behind, or the server stops: the page resumes
			}
			if !send(ev) {
				return
			}
			// An event goes out at once unless the stream is in a burst
			// (burstWrites writes in the last burstWindow, some 25 a
			// second): then it waits up to burstGap and sends what came
			// meanwhile in one write. A browser pays per message it is
			// handed, and ten pages fed a hundred events a second took a
			// core from the writers.
			now := time.Now()
			for len(recent) > 0 && now.Sub(recent[0]) > burstWindow {
				recent = recent[1:]
			}
			if len(recent) >= burstWrites {
				hold := time.NewTimer(burstGap)
			gather:
				for {
					select {
					case ev, ok := <-sub.ch:
						if !ok || !send(ev) {
							hold.Stop()
							return
						}
					case <-hold.C:
						break gather
					case <-ctx.Done():
						hold.Stop()
						return
					}
				}
			}
			// Send what else is queued in the same write.
			for n := len(sub.ch); n > 0; n-- {
				if ev, ok = <-sub.ch; !ok || !send(ev) {
					return
				}
			}
			fl.Flush()
			recent = append(recent, time.Now())
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// resumeAfter is the event id a stream starts after: Last-Event-ID (an
// EventSource reconnecting), else ?after_event, else the log's end.
func (s *server) resumeAfter(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	field := "Last-Event-ID"
	if v == "" {
		v, field = r.URL.Query().Get("after_event"), "after_event"
	}
	if v == "" {
		return s.cfg.Bus.LastEventID(r.Context())
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &apiError{status: http.StatusBadRequest, code: "invalid_input", field: field,
			msg: fmt.Sprintf("%s %q must be an event id (a whole number, 0 or more)", field, v)}
	}
	return n, nil
}
