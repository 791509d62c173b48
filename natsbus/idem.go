package natsbus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inbox-dev/inbox"
)

// Idempotency keys. A key given to a change of a thread is recorded in the
// thread's state by the change itself (record.Idem): a retry finds it
// there, in the same compare-and-set. A key given to a thread-creating
// send is store-wide: the key idem.<sha256> of the store's bucket names
// the thread, created (KV create: once) before the thread is; a retry that
// finds it and no thread creates the thread under that id, so the thread
// exists once whichever attempt gets there.

func idemHash(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

func mismatch(k, used, cmd string) error {
	return inbox.Errorf(inbox.ErrIdempotencyMismatch, "idempotency_key_reused", "idempotency_key",
		"%q was already used by %s in this scope; use a new key for %s", k, used, cmd)
}

// replay is a decision that the call was made before: its result.
type replay struct{ res *inbox.Result }

func (r *replay) Error() string { return "replayed" }

// idempotent checks key k, given to command cmd with arguments args
// (inbox.IdemArgs), in a thread change: an earlier call with it replays
// (a *replay error), or is refused when its arguments differ
// (inbox.CheckIdemArgs); otherwise the change records it.
func (c *change) idempotent(ctx context.Context, cmd, k, args string) error {
	if k == "" {
		return nil
	}
	if err := inbox.ValidateIdemKey(k); err != nil {
		return err
	}
	if rec, ok := c.r.Idem[idemHash(k)]; ok && rec.Key == k {
		if rec.Command != cmd {
			return mismatch(k, rec.Command, cmd)
		}
		if err := inbox.CheckIdemArgs(k, rec.Args, args); err != nil {
			return err
		}
		m, err := c.b.messageAt(ctx, c.r.Thread.ThreadID, rec.Seq)
		if err != nil {
			return err
		}
		t := c.r.Thread
		return &replay{&inbox.Result{Thread: &t, Message: m, Lease: c.r.Lease, Replayed: true}}
	}
	c.idem = &idemRecord{Key: k, Command: cmd, Args: args}
	return nil
}

// newThreadKey is the record of a store-wide key.
type newThreadKey struct {
	Key      string `json:"key"`
	Command  string `json:"command"`
	ThreadID string `json:"thread_id"`
	// Args is what the send was given (inbox.NewThreadArgs); a record of
	// a version before them has none.
	Args string `json:"args,omitempty"`
}

// claimKey returns the thread a thread-creating key, given with
// arguments args, stands for: tid when the key is new (it is recorded
// now), or the thread an earlier call chose. The key is the first call's
// once recorded: a call with other arguments is refused, whether or not
// the first got as far as creating its thread.
func (b *Bus) claimKey(ctx context.Context, k, tid, args string) (string, error) {
	name := "idem." + idemHash(k)
	for attempt := 0; attempt < 10; attempt++ {
		var e jetstream.KeyValueEntry
		err := b.retry(ctx, func(ctx context.Context) (err error) {
			e, err = b.kv.Get(ctx, name)
			return err
		})
		if err == nil {
			var rec newThreadKey
			if json.Unmarshal(e.Value(), &rec) == nil && rec.Key == k {
				if rec.Command != "send" {
					return "", mismatch(k, rec.Command, "send")
				}
				if err := inbox.CheckIdemArgs(k, rec.Args, args); err != nil {
					return "", err
				}
				return rec.ThreadID, nil
			}
			return tid, nil // a hash collision: run afresh
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return "", inbox.Storage(err, "read idempotency record")
		}
		data, _ := json.Marshal(newThreadKey{Key: k, Command: "send", ThreadID: tid, Args: args})
		err = b.retry(ctx, func(ctx context.Context) error {
			_, err := b.kv.Create(ctx, name, data)
			return err
		})
		if err == nil {
			return tid, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", inbox.Storage(err, "record idempotency key")
		}
	}
	return "", inbox.Storage(errors.New("the record kept changing"), "record idempotency key")
}
