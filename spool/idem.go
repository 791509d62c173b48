package spool

import (
	"context"
	"encoding/hex"
	"errors"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// idemRecord remembers that a call with an idempotency key produced a
// message. It is written before the message, so a retry after a crash at
// any point either finds the committed message (and replays it) or finds
// that nothing was committed (and runs the call afresh).
type idemRecord struct {
	Key       string `json:"key"`
	Command   string `json:"command"`
	ThreadID  string `json:"thread_id"`
	MessageID string `json:"message_id"`
	Seq       int    `json:"seq"`
	CreatedAt string `json:"created_at"`
	// Args is what the call was given (inbox.IdemArgs); a record of a
	// version before them has none.
	Args string `json:"args,omitempty"`
	hash string
}

// idemHash names a key's record file: FNV-1a, 128 bits. The record keeps
// the key itself, so a collision is detected rather than trusted.
func idemHash(key string) string {
	h := fnv.New128a()
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil))
}

// readOptional reads a file that may not exist: nil data then.
func readOptional(path, what string) ([]byte, error) {
	data, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, inbox.Storage(err, "read %s", what)
}

func readIdem(path string) (*idemRecord, error) {
	data, err := readOptional(path, "idempotency record")
	if data == nil || err != nil {
		return nil, err
	}
	var r idemRecord
	if err := r.decodeJSON(data); err != nil {
		return nil, nil // a record we cannot read protects nothing: run afresh
	}
	return &r, nil
}

func mismatch(key, used, cmd string) error {
	return inbox.Errorf(inbox.ErrIdempotencyMismatch, "idempotency_key_reused", "idempotency_key",
		"%q was already used by %s in this scope; use a new key for %s", key, used, cmd)
}

// idempotent checks key, given to command cmd with arguments args
// (inbox.IdemArgs), inside a thread transaction. When an earlier call
// with the key committed, it returns that call's result (the message it
// wrote, the thread and lease as they are now) and marks the transaction
// as having nothing to commit, or refuses the call when its arguments
// differ (inbox.CheckIdemArgs). Otherwise it stages a new record for the
// message the caller is about to add.
func (t *tx) idempotent(cmd, key, args string) (*inbox.Result, error) {
	if key == "" {
		return nil, nil
	}
	hash := idemHash(key)
	rec, err := readIdem(filepath.Join(t.dir, threadIdemName(hash)))
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.Key == key {
		if rec.Command != cmd {
			return nil, mismatch(key, rec.Command, cmd)
		}
		if rec.Seq >= 1 && rec.Seq <= t.h.MessageCount {
			m, err := t.s.readMessageAt(t.dir, t.tid, rec.Seq)
			if err == nil && m.MessageID == rec.MessageID {
				if err := inbox.CheckIdemArgs(key, rec.Args, args); err != nil {
					return nil, err
				}
				t.skip = true
				return &inbox.Result{Thread: &t.old.Thread, Message: m, Lease: t.old.Lease, Replayed: true}, nil
			}
		}
	}
	t.idem = &idemRecord{Key: key, Command: cmd, ThreadID: t.tid, CreatedAt: inbox.FormatTime(t.now), Args: args, hash: hash}
	return nil, nil
}

// sealIdem fills in the message the staged record stands for.
func (t *tx) sealIdem() {
	if t.idem != nil && t.msg != nil {
		t.idem.MessageID, t.idem.Seq = t.msg.MessageID, t.msg.Seq
	}
}

// A thread-creating send's key (store-scoped) is recorded by a hard link
// idem/<hash>.json to the new thread's first message, made before that
// message is renamed into place (the commit point): it costs no inode and
// no write of its own. The first message records the key, so the link
// identifies the thread and a hash collision is detected.

// newThreadReplay looks up a store-scoped key given with arguments args
// (inbox.NewThreadArgs): the thread an earlier call with it committed, or
// nothing (removing the link of an attempt that never committed). A call
// whose arguments differ from the committed one's is refused.
func (s *Store) newThreadReplay(ctx context.Context, key, args string) (*inbox.Result, error) {
	p := s.idemPath(idemHash(key))
	data, err := readOptional(p, "idempotency record")
	if data == nil || err != nil {
		return nil, err
	}
	var m msgFile
	if m.decodeJSON(data) != nil || m.IdempotencyKey != key || m.ThreadID == "" {
		return nil, nil // not ours (a hash collision or garbage): run afresh
	}
	if m.IdempotencyCommand != "" && m.IdempotencyCommand != "send" {
		return nil, mismatch(key, m.IdempotencyCommand, "send")
	}
	dir, archived := s.viewDir(m.ThreadID)
	h, err := s.readHeaderAt(dir, m.ThreadID)
	if errors.Is(err, inbox.ErrNotFound) {
		// The earlier attempt never committed: forget it.
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, inbox.Storage(err, "remove stale idempotency record")
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := inbox.CheckIdemArgs(key, m.IdempotencyArgs, args); err != nil {
		return nil, err
	}
	if !archived {
		// The earlier call may have died after its commit point and before
		// its event reached the log (a retry after a crash is the reason
		// keys exist): settle the thread, as its next writer would, so that
		// a change is never acknowledged while its event is missing.
		if h, err = s.settled(ctx, m.ThreadID); err != nil {
			return nil, err
		}
	}
	msg := m.Message
	return &inbox.Result{Thread: &h.Thread, Message: &msg, Lease: h.Lease, Replayed: true}, nil
}
