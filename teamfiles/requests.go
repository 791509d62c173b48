package teamfiles

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// requestIndex finds what a message taken in from a file answers: the
// thread of a request by its request id, and the message an
// acknowledgment names by its message id or ack id. The bus keeps no
// index by either, so the bridge builds one from the event log: the
// messages of the events up to UpTo that carry a request id or ask for
// an acknowledgment. It is persisted beside the bridge's state and
// brought up to the log's end when a lookup misses, so it costs nothing
// while no line answers anything, and a lookup reads only the events
// since the last one. Losing the file costs one scan of the log.
//
// It belongs to one goroutine: the bridge's loop (or fsck's).
type requestIndex struct {
	bus  inbox.Bus
	path string // "": kept in memory only
	// loaded is set once the file was read; dirty when it changed since.
	loaded, dirty bool
	s             indexState
}

// indexState is the index as persisted.
type indexState struct {
	// UpTo is the last event whose message the index has looked at.
	UpTo int64 `json:"up_to"`
	// Requests maps a request id to its newest request.
	Requests map[string]requestRef `json:"requests"`
	// Acks maps an ack id, and the id of the message that carries it, to
	// that message.
	Acks map[string]ackRef `json:"acks"`
}

// requestRef is a request: its thread and who asked.
type requestRef struct {
	Thread string `json:"thread"`
	From   string `json:"from"`
}

// ackRef is a message that asks for acknowledgment.
type ackRef struct {
	Thread  string `json:"thread"`
	Message string `json:"message"`
}

func newRequestIndex(bus inbox.Bus, dir, name string) *requestIndex {
	x := &requestIndex{bus: bus}
	if dir != "" {
		x.path = filepath.Join(dir, stateDir, name)
	}
	return x
}

func (x *requestIndex) load() {
	if x.loaded {
		return
	}
	x.loaded = true
	if x.path != "" {
		if err := readJSON(x.path, &x.s); err != nil {
			x.s = indexState{} // rebuilt from the log
		}
	}
	if x.s.Requests == nil {
		x.s.Requests = map[string]requestRef{}
	}
	if x.s.Acks == nil {
		x.s.Acks = map[string]ackRef{}
	}
}

// note records the message m that event ev added, when the index has
// looked at every event before ev (after is the event the caller handled
// before ev): the bridge's outbound side, which reads every message
// anyway, keeps the index up to date at no cost of its own.
func (x *requestIndex) note(after int64, ev *inbox.Event, m *inbox.Message) {
	x.load()
	if x.s.UpTo != after || ev.EventID <= after {
		return
	}
	x.add(m)
	x.s.UpTo = ev.EventID
	x.dirty = true
}

func (x *requestIndex) add(m *inbox.Message) {
	if m == nil {
		return
	}
	// A request id names the newest thread it was asked in; the responses
	// in that thread change nothing.
	if m.RequestID != "" && x.s.Requests[m.RequestID].Thread != m.ThreadID {
		x.s.Requests[m.RequestID] = requestRef{Thread: m.ThreadID, From: m.FromAgent}
	}
	if inbox.WantsAck(m) {
		ref := ackRef{Thread: m.ThreadID, Message: m.MessageID}
		x.s.Acks[m.AckID] = ref
		x.s.Acks[m.MessageID] = ref
	}
}

// catchUp looks at the events after UpTo.
func (x *requestIndex) catchUp(ctx context.Context) error {
	x.load()
	var err error
	ferr := x.bus.Events(ctx, x.s.UpTo, func(ev *inbox.Event) bool {
		if ev.MessageID != "" {
			m, _ := messageOf(ctx, x.bus, ev)
			x.add(m)
		}
		x.s.UpTo = ev.EventID
		x.dirty = true
		return ctx.Err() == nil
	})
	if ferr != nil {
		err = fmt.Errorf("index the requests: %w", ferr)
	}
	return err
}

// request returns the newest request that carries id, ok false when
// none does.
func (x *requestIndex) request(ctx context.Context, id string) (requestRef, bool, error) {
	return lookup(ctx, x, func() map[string]requestRef { return x.s.Requests }, id)
}

// acked returns the message an acknowledgment names by id (its message
// id or ack id), ok false when none asks for one.
func (x *requestIndex) acked(ctx context.Context, id string) (ackRef, bool, error) {
	return lookup(ctx, x, func() map[string]ackRef { return x.s.Acks }, id)
}

// lookup finds id in one of the index's maps (read after each step: a
// load or a catch-up may replace it), catching up with the event log
// once when it is not there.
func lookup[T any](ctx context.Context, x *requestIndex, m func() map[string]T, id string) (T, bool, error) {
	x.load()
	if r, ok := m()[id]; ok {
		return r, true, nil
	}
	if err := x.catchUp(ctx); err != nil {
		var zero T
		return zero, false, err
	}
	r, ok := m()[id]
	return r, ok, nil
}

// save writes the index when it changed.
func (x *requestIndex) save() error {
	if !x.dirty || x.path == "" {
		return nil
	}
	if err := writeJSON(x.path, &x.s); err != nil {
		return err
	}
	x.dirty = false
	return nil
}
