package natsbus

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Waits on someone (SPEC §15's wait graph). A wait that says what it is
// on (WaitingOn) keeps, as every wait does (Waiting), a responder on its
// agent's presence subject and a key wait.<agent>.<id>; its key's value
// is the inbox.WaitInfo as JSON instead of the time alone, and a second
// responder on the presence subject followed by .<id> proves that this
// very wait is still in progress: a killed waiter's connection is gone,
// and the request finds no responders at once.

// WaitingOn records a wait of w.Agent on what w names until release is
// called (Waiting, with w as the key's value).
func (b *Bus) WaitingOn(ctx context.Context, w inbox.WaitInfo) (release func()) {
	return b.register(ctx, w.Agent, &w)
}

// Waits lists the waits in progress that recorded what they are on
// (WaitingOn), oldest first: those whose own subject still has a
// responder.
func (b *Bus) Waits(ctx context.Context) ([]inbox.WaitInfo, error) {
	out := []inbox.WaitInfo{}
	rctx, cancel := b.ctx(ctx)
	defer cancel()
	l, err := b.kv.ListKeysFiltered(rctx, "wait.>")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return out, nil
		}
		return nil, inbox.Storage(err, "list the waits")
	}
	for k := range l.Keys() {
		name, id, ok := agentKey(k)
		if !ok {
			continue
		}
		e, err := b.kv.Get(rctx, k)
		if err != nil || len(e.Value()) == 0 || e.Value()[0] != '{' {
			continue // ended meanwhile, or a plain wait
		}
		var w inbox.WaitInfo
		if json.Unmarshal(e.Value(), &w) != nil || w.Reason == "" {
			continue
		}
		if _, err := b.nc.RequestWithContext(rctx, b.presenceSubject(name)+"."+id, nil); err != nil {
			continue // its process is gone (no responders)
		}
		w.Agent = name
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b inbox.WaitInfo) int { return strings.Compare(a.Since+a.Agent, b.Since+b.Agent) })
	return out, nil
}

// waitBegan is when the wait whose key holds value began: the value is
// the time, or a WaitInfo (WaitingOn).
func waitBegan(value []byte) time.Time {
	if len(value) > 0 && value[0] == '{' {
		var w inbox.WaitInfo
		json.Unmarshal(value, &w)
		value = []byte(w.Since)
	}
	at, _ := inbox.ParseTime(string(value))
	return at
}
