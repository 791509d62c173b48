package spool

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// Settling a thread: what the next writer of a thread (or fsck --repair)
// does with what a killed writer left half-done. See tx for the order of
// a change's writes that makes every such state one that settle can
// finish or take back.

// settled returns thread tid's header after settling, under the thread's
// lock, whatever a crashed writer left (see loadForWrite).
func (s *Store) settled(ctx context.Context, tid string) (*header, error) {
	lk, err := s.lockThread(ctx, tid)
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	return s.loadForWrite(ctx, tid)
}

// loadForWrite reads the header under the thread lock and settles what a
// crashed writer left behind.
func (s *Store) loadForWrite(ctx context.Context, tid string) (*header, error) {
	h, err := s.readHeader(tid)
	if err != nil {
		return nil, err
	}
	logged, err := s.hasOwnEvent(h)
	if err != nil {
		return nil, err
	}
	orphans := exists(filepath.Join(s.threadDir(tid), msgName(h.MessageCount+1)))
	if !orphans {
		l, err := s.readLeaseFile(tid)
		if err != nil {
			return nil, err
		}
		orphans = (l == nil) != (h.LeaseRev == 0) || l != nil && l.Rev != h.LeaseRev
	}
	if logged && !orphans {
		return h, nil
	}
	return s.settle(ctx, tid, h, logged)
}

// hasOwnEvent reports whether the header's last event is in the log where
// the header says it ends (true too when that segment was archived).
func (s *Store) hasOwnEvent(h *header) (bool, error) {
	if h.LastEventID == 0 {
		return false, nil
	}
	if !exists(s.log.segPath(h.LogPos.Segment)) {
		return true, nil
	}
	// The line's head and checksum: a line that carries a large message
	// is checked, not held. A read that fails is an error, never "not
	// logged": that would append the event a second time.
	head, _, ok, garbled, err := s.log.headAt(h.LogPos)
	if err != nil {
		return false, err
	}
	if garbled && s.log.continuesAfter(h.LogPos) {
		// Damage inside the log, not a crash (appends are whole and at
		// the end): the event is there. Appending it again would give it
		// a second id; fsck --repair restores it under its own.
		return true, nil
	}
	if !ok {
		return false, nil
	}
	id, _ := lineID(head)
	return id == h.LastEventID && bytes.Contains(head, []byte(`"thread_id":"`+h.ThreadID+`"`)), nil
}

// settle repairs a thread after a crash: a header whose event never reached
// the log gets it appended; events past the header (possible only after a
// power loss) roll the header forward; records that no header counts are
// removed (messages) or restored from the header (the lease file); the
// index is reconciled.
//
// A re-appended event follows the commit protocol: its new header line is
// appended before the event is written. Were it the other way round, a
// crash between the two would leave an event no header names, and the
// next settle would append it a second time.
func (s *Store) settle(ctx context.Context, tid string, h *header, logged bool) (*header, error) {
	newest := h
	var ap *appender
	var line []byte
	if logged {
		var err error
		if newest, err = s.newestState(h.LogPos, tid, h); err != nil {
			return nil, err
		}
	} else {
		var err error
		if ap, err = s.log.reserve(ctx); err != nil {
			return nil, err
		}
		defer ap.release()
		ev := inbox.Event{EventType: inbox.EventThreadUpdated, ThreadID: tid}
		if h.LastEvent != nil {
			ev = *h.LastEvent
		}
		n := h.clone()
		ev.EventID = ap.next
		line = encodeEvent(&logEvent{Event: ev, State: snapshot(n)})
		n.LastEventID, n.LogPos, n.LastEvent = ev.EventID, Pos{Segment: ap.first, Offset: ap.end + int64(len(line))}, &ev
		newest = n
	}
	dir := s.threadDir(tid)
	var ss syncSet
	ss.add(dir)
	if err := s.rollBack(dir, newest, "uncommitted"); err != nil {
		return nil, err
	}
	if newest != h {
		dirs, err := s.idx.Add(entryOf(newest), filepath.Join(dir, msgName(1)))
		if err != nil {
			return nil, inbox.Storage(err, "index thread %s", tid)
		}
		ss.add(dirs...)
	}
	if err := ss.flush(); err != nil {
		return nil, err
	}
	if newest != h {
		if _, err := s.appendHeader(dir, newest, nil, true); err != nil {
			return nil, err
		}
	}
	if ap != nil {
		if err := ap.writeDurable(line, 1); err != nil {
			return nil, err
		}
		ap.release()
	}
	if newest != h && indexChanged(h, newest) {
		if err := s.idx.Remove(entryOf(h), entryOf(newest)); err != nil {
			return nil, inbox.Storage(err, "index thread %s", tid)
		}
	}
	return newest, nil
}

// rollBack makes the records of the thread whose directory is dir agree
// with its header h: message files past its count go, and lease.json
// becomes h's lease (or goes when h has none). what says, in an error,
// what those records were ("uncommitted", "unlogged").
func (s *Store) rollBack(dir string, h *header, what string) error {
	for seq := h.MessageCount + 1; ; seq++ {
		p := filepath.Join(dir, msgName(seq))
		if !exists(p) {
			break
		}
		if err := os.Remove(p); err != nil {
			return inbox.Storage(err, "remove %s message %s", what, p)
		}
	}
	if h.Lease != nil {
		_, err := s.writeLeaseFile(dir, &leaseRecord{Lease: *h.Lease, Rev: h.LeaseRev})
		return err
	}
	if err := os.Remove(filepath.Join(dir, leaseFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return inbox.Storage(err, "remove %s lease of %s", what, filepath.Base(dir))
	}
	return nil
}
