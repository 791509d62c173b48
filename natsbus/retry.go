package natsbus

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Servers fail over: while a stream or the cluster elects a new leader,
// or the connection moves to another server, requests get no responder,
// time out or are told JetStream is unavailable for a few seconds. Every
// request the operations make is retried through that (retryFor), and
// a change keeps its identity across retries (record.Change), so that a
// publish whose acknowledgment was lost is recognised, not made twice.

// retryFor is how long a request is retried through a fail-over.
const retryFor = 30 * time.Second

// transient reports whether err is one of fail-over's.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrJetStreamNotEnabled) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10008, // JetStream cluster not available
			10074, // stream is offline / no quorum (peer and leader errors)
			10076: // insufficient resources while peers catch up
			return true
		}
		return apiErr.Code == 503
	}
	return false
}

// retry runs f until it succeeds, fails for good, retryFor passes, or
// ctx ends: each attempt gets ctx with the request timeout (Bus.ctx), and
// the waits between attempts double up to a second with random jitter
// (a half to the full wait), so that the clients a fail-over interrupted
// do not all come back in step. A cancelled ctx stops the waiting at once
// and returns ctx's error.
func (b *Bus) retry(ctx context.Context, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(retryFor)
	wait := 50 * time.Millisecond
	for {
		actx, cancel := b.ctx(ctx)
		err := f(actx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if !transient(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, time.Second)
	}
}

// jitter is a random duration between half of d and d.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
