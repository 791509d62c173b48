package spool

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// The durable watermark (docs/ARCHITECTURE.md, "One flush per
// acknowledged write"). A change's files are materialised without fsyncs;
// its log line is what reaches the disk before it is acknowledged.
// durable.json says up to which event the materialised files are known to
// be on disk, and under which boot of the machine they were written since:
// while the machine has not crashed or restarted, the page cache holds
// them all, and there is nothing to replay.

const (
	durableFile = "durable.json"
	// checkpointEvery is how many events a writer lets pass the watermark
	// before it checkpoints: a checkpoint costs a syncfs and a small
	// durable write, so a write waits on 1 + 2/256 flushes on average.
	checkpointEvery = 256
)

// watermark is durable.json.
type watermark struct {
	BootID  string `json:"boot_id"`
	EventID int64  `json:"event_id"`
}

func (s *Store) readWatermark() (watermark, bool) {
	data, err := readFile(filepath.Join(s.dir, durableFile))
	if err != nil {
		return watermark{}, false
	}
	var w watermark
	if w.decodeJSON(data) != nil {
		return watermark{}, false
	}
	return w, true
}

// writeWatermark writes durable.json, durably.
func (s *Store) writeWatermark(w watermark) error {
	if err := publishFile(filepath.Join(s.dir, durableFile), s.tmpDir(), s.fileMode, w.appendJSON(nil)); err != nil {
		return err
	}
	return syncDir(s.dir)
}

// setMark records the watermark this Store last saw (goroutines share a
// Store: the id is read without a lock by maybeCheckpoint).
func (s *Store) setMark(w watermark) { s.markID.Store(w.EventID) }

// maybeCheckpoint checkpoints when the log has grown checkpointEvery
// events past the watermark this Store last saw. A failed checkpoint is
// not the change's failure: the next one covers its events.
func (s *Store) maybeCheckpoint(last int64) {
	if s.unsynced || s.checkpointEvery < 0 || last-s.markID.Load() < int64(s.checkpointEvery) {
		return
	}
	s.Checkpoint()
}

// Checkpoint makes every file materialised so far durable (one syncfs of
// the store's file system) and advances the watermark to the last event
// whose files those are: a change's files are written before its log
// line, so every event in the log when the sync starts is covered. The
// daemon calls it every few seconds. Only one process checkpoints at a
// time; another's checkpoint in progress makes this one return at once.
// It also sweeps tmp/ of the temp files of writers that died.
func (s *Store) Checkpoint() error {
	lk := newLock(s.lockFile("checkpoint.lock"), s.fileMode)
	ok, err := tryLock(lk)
	if err != nil || !ok {
		return inbox.Storage(err, "lock the checkpoint")
	}
	defer lk.Unlock()
	s.sweepTemps(s.now())
	if s.unsynced || s.checkpointEvery < 0 {
		return nil
	}
	return s.checkpointLocked()
}

// checkpointLocked is Checkpoint for a caller that keeps other
// checkpoints out (the checkpoint lock, or every lock of the store).
//
// It never advances a watermark written under another boot of the
// machine: that one marks a replay still to run (openDurable skipped it,
// say because a top-level folder was a symbolic link), and a checkpoint
// past it would leave the files replay should restore lost for good.
func (s *Store) checkpointLocked() error {
	last, _, err := s.log.lastID()
	if err != nil {
		return err
	}
	w, ok := s.readWatermark()
	if ok && w.BootID != bootID() {
		why := ""
		if s.linkErr != nil {
			why = " (" + s.linkErr.Error() + ")"
		}
		return &inbox.Error{Code: "replay_pending", Err: inbox.ErrStorage,
			Rule: "the store has not been replayed since the machine restarted" + why +
				"; no checkpoint until it is: run inbox fsck --repair, then any command"}
	}
	if ok && w.EventID >= last {
		s.setMark(w)
		return nil
	}
	return s.advanceMark(last)
}

// advanceMark makes every file materialised so far durable (syncfs) and
// then says so in durable.json: the watermark becomes last, under this
// boot of the machine.
func (s *Store) advanceMark(last int64) error {
	if err := syncFS(s.dir); err != nil {
		return inbox.Storage(err, "sync the store's file system")
	}
	w := watermark{BootID: bootID(), EventID: last}
	if err := s.writeWatermark(w); err != nil {
		return err
	}
	s.setMark(w)
	return nil
}

// openDurable reads the watermark at open and replays the log past it
// when the machine crashed or restarted since the files were written. A
// format 1 store, whose every file was fsynced, is converted: its
// watermark is its last event.
func (s *Store) openDurable(ctx context.Context, version int) error {
	w, ok := s.readWatermark()
	if ok && w.BootID == bootID() && version == FormatVersion {
		// (Where the system tells no boot id, both are empty: such
		// systems get no replay; see sync_other.go.)
		s.setMark(w)
		return nil
	}
	if s.linkErr != nil {
		return nil // writes are refused anyway; fsck --repair removes the link
	}
	s, unlock, err := s.lockAllToWrite(ctx) // from here on, the locked view
	if err != nil {
		return err
	}
	defer unlock()
	// Another process may have done it while this one waited.
	if w, ok = s.readWatermark(); ok && w.BootID == bootID() {
		if info, err := readFormat(s.dir); err == nil && info.Version == FormatVersion {
			s.setMark(w)
			return nil
		}
	}
	last, _, err := s.log.lastID()
	if err != nil {
		return err
	}
	switch {
	case version < FormatVersion:
		// Format 1: everything on disk is durable.
	case !ok || w.EventID < last:
		if err := s.replay(ctx, w.EventID); err != nil {
			return err
		}
	}
	if err := s.advanceMark(last); err != nil {
		return err
	}
	if version < FormatVersion {
		return s.writeFormatVersion()
	}
	return nil
}

// writeFormatVersion rewrites inbox.json with this package's format
// version, keeping the rest.
func (s *Store) writeFormatVersion() error {
	info, err := readFormat(s.dir)
	if err != nil {
		return err
	}
	info.Version = FormatVersion
	return writeFormat(s.dir, s.fileMode, info)
}

// replay restores, after a crash of the machine, what the log says and
// the files may have lost: every thread becomes its newest logged state.
// Changes after the watermark are redone from their log lines (the
// message, the idempotency and task records, the cursor); a thread whose
// files are ahead of the log (a change cut off before its line was on
// disk, never acknowledged) is rolled back; a thread created after the
// watermark that the log does not know is removed. The index is rebuilt.
// The caller holds every lock.
func (s *Store) replay(ctx context.Context, after int64) error {
	newest := map[string]*header{}              // thread → its header after its newest event
	msgs := map[string]map[int]*loggedMessage{} // thread → seq → the event that added it (after the watermark)
	type cursorKey struct{ tid, agent string }
	cursors := map[cursorKey]*inbox.Cursor{}
	teams := map[string]*teamRecord{} // each team's newest logged state
	var last int64
	err := s.log.scanFull(Pos{}, func(ev *logEvent, end Pos) bool {
		last = max(last, ev.EventID)
		noteTeam(teams, ev)
		if ev.State != nil {
			newest[ev.ThreadID] = ev.stateAt(end)
		}
		if ev.EventID <= after {
			return true
		}
		if ev.Message != nil {
			if msgs[ev.ThreadID] == nil {
				msgs[ev.ThreadID] = map[int]*loggedMessage{}
			}
			msgs[ev.ThreadID][ev.Message.Seq] = &loggedMessage{ev: *ev, end: end}
		}
		if c, ok := readOf(ev); ok {
			k := cursorKey{ev.ThreadID, ev.Agent}
			if old := cursors[k]; old == nil || c.LastReadSeq > old.LastReadSeq {
				cursors[k] = c
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	tids, err := s.threadIDs()
	if err != nil {
		return err
	}
	onDisk := map[string]bool{}
	for _, tid := range tids {
		onDisk[tid] = true
	}
	for tid := range newest {
		if !onDisk[tid] && !exists(s.archivedDir(tid)) {
			tids = append(tids, tid)
		}
	}
	for _, tid := range tids {
		if inbox.ValidateID("thread", tid) != nil {
			continue
		}
		if err := s.replayThread(tid, newest[tid], msgs[tid], after, last); err != nil {
			return err
		}
	}
	for k, c := range cursors {
		// The cursor goes where its thread is: in the live tree, else in
		// the archive (a thread archived after the watermark); a thread
		// that is in neither (replay removed it) has no cursor to keep.
		dir := s.threadDir(k.tid)
		if !exists(dir) {
			if dir = s.archivedDir(k.tid); !exists(dir) {
				continue
			}
		}
		body, err := readLastLine(filepath.Join(dir, cursorName(k.agent)))
		if err != nil {
			return inbox.Storage(err, "read cursor of %s in %s", k.agent, k.tid)
		}
		var cur inbox.Cursor
		if body == nil || cur.DecodeJSON(body) != nil || cur.LastReadSeq < c.LastReadSeq {
			p := filepath.Join(dir, cursorName(k.agent))
			if _, _, err := s.appendLine(p, encodeLine(c.AppendJSON(nil)), maxCursorLog, false); err != nil {
				return err
			}
		}
		if dir == s.threadDir(k.tid) {
			// The read's collects were not flushed: redo them.
			s.collectRead(k.tid, k.agent, c.LastReadSeq)
		}
	}
	if err := s.replayCollectedCursors(); err != nil {
		return err
	}
	if err := s.restoreTeams(teams, after, last); err != nil {
		return err
	}
	if _, err := s.rebuildIndex(); err != nil {
		return err
	}
	// What no restored thread counts any more (mailbox entries, records
	// of changes rolled back) goes as after any crash.
	_, err = s.fsck(ctx, true)
	return err
}

// loggedMessage is a message in the log: the event that added it, and
// where that event's line ends.
type loggedMessage struct {
	ev  logEvent
	end Pos
}

// replayThread makes one thread its newest logged state (target; nil when
// the log does not name it). msgs are the messages its events after the
// watermark added; last is the newest event in the log.
func (s *Store) replayThread(tid string, target *header, msgs map[int]*loggedMessage, after, last int64) error {
	dir := s.threadDir(tid)
	h, herr := s.readHeader(tid)
	if target == nil {
		// No logged event: a thread from before the log's first segment
		// (archived segments), or one created after the watermark whose
		// line never reached the disk.
		if herr == nil && h.LastEventID > last {
			return s.removeThread(tid)
		}
		if errors.Is(herr, inbox.ErrNotFound) {
			return s.removeThread(tid)
		}
		return nil
	}
	if err := os.MkdirAll(dir, s.dirMode); err != nil {
		return inbox.Storage(err, "restore thread %s", tid)
	}
	// Messages: those the log added after the watermark are rewritten
	// where missing or unreadable; any past the target's count go.
	for seq := 1; seq <= target.MessageCount; seq++ {
		lm := msgs[seq]
		if lm == nil {
			continue // added before the watermark: on disk
		}
		ev := &lm.ev
		p := filepath.Join(dir, msgName(seq))
		if m, err := s.readMessage(tid, seq); err == nil && m.MessageID == ev.Message.MessageID {
			continue
		}
		mf := *ev.Message
		if seq == 1 {
			mf.InitialHeader = firstHeader(ev, lm.end, target)
		}
		if err := publishFile(p, s.tmpDir(), s.fileMode, mf.appendJSON(nil)); err != nil {
			return err
		}
		if ev.Task != "" && seq == 1 {
			// (A name reused: the newer task keeps it, the older one
			// goes to the name's history.)
			if err := s.restoreTask(ev.Task, tid, p); err != nil {
				return err
			}
		}
		if mf.IdempotencyKey != "" && seq == 1 {
			ip := s.idemPath(idemHash(mf.IdempotencyKey))
			os.Remove(ip)
			os.MkdirAll(filepath.Dir(ip), s.dirMode)
			if err := os.Link(p, ip); err != nil {
				return inbox.Storage(err, "restore idempotency record")
			}
		}
		if ev.Idem != nil {
			r := *ev.Idem
			if err := publishFile(filepath.Join(dir, threadIdemName(idemHash(r.Key))), s.tmpDir(), s.fileMode, r.appendJSON(nil)); err != nil {
				return err
			}
		}
		if ev.Message.ToAgent != "" && ev.Task == "" {
			// Mail not yet collected, and acknowledgments still owed.
			m := &ev.Message.Message
			name := markerName(m)
			_, err := s.deliver(m, p, func(to string, ack bool) bool {
				if ack {
					return s.ackOf(tid, m, to) != nil
				}
				return exists(filepath.Join(s.mailboxPath(to), collectedDir, name))
			})
			if err != nil {
				return err
			}
		}
		if ev.Message.Type == inbox.TypeAcknowledgment {
			if err := s.dropAckMarker(tid, &ev.Message.Message); err != nil {
				return err
			}
		}
	}
	if err := s.rollBack(dir, target, "unlogged"); err != nil {
		return err
	}
	// The header: the target, unless the files already say exactly that
	// (a thread whose first message, just restored, is all there is).
	if h, err := s.readHeader(tid); err != nil || h.LastEventID != target.LastEventID {
		if _, err := s.appendHeader(dir, target, nil, false); err != nil {
			return err
		}
	}
	return nil
}

// firstHeader is the initial header a thread's first message carries:
// the thread as its creating event (whose line ends at end) left it.
func firstHeader(ev *logEvent, end Pos, target *header) *header {
	if ev.State == nil {
		return target
	}
	return ev.stateAt(end)
}

// removeThread removes a thread the log does not know, with its files.
func (s *Store) removeThread(tid string) error {
	return inbox.Storage(os.RemoveAll(s.threadDir(tid)), "remove thread %s", tid)
}
