package spool

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
)

// crashMachine makes the store look as if the machine crashed: the
// watermark names another boot, at event id w.
func crashMachine(t *testing.T, db string, w int64) {
	t.Helper()
	data := (&watermark{BootID: "a-boot-before-the-crash", EventID: w}).appendJSON(nil)
	if err := os.WriteFile(filepath.Join(db, durableFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// views is every thread of the store as Show returns it, without the
// fields that replay does not keep (a lease file's time hint is not in
// the view).
func views(t *testing.T, s *Store) map[string]*inbox.ThreadView {
	t.Helper()
	ths, err := s.List(t.Context(), inbox.ListFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*inbox.ThreadView{}
	for _, th := range ths {
		v, err := s.Show(t.Context(), th.ThreadID)
		if err != nil {
			t.Fatal(err)
		}
		out[th.ThreadID] = v
	}
	return out
}

// TestReplayRestoresWhatACrashLost: every file written after the
// watermark is lost (as a crash of the machine may lose files no fsync
// covered); the next open replays the log and every thread, message,
// lease, mailbox entry, idempotency record, task and cursor is back.
func TestReplayRestoresWhatACrashLost(t *testing.T) {
	s, db := openTemp(t)
	old, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "before the watermark"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	w := s.markID.Load()
	// Everything below is after the watermark.
	a, _ := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "work", Content: inbox.Content{Body: "the body", IdempotencyKey: "k1"}})
	s.Claim(t.Context(), "w", a.Thread.ThreadID, 600)
	s.Update(t.Context(), "w", a.Thread.ThreadID, inbox.StatusBlocked, 0, inbox.Content{Summary: "which one?", IdempotencyKey: "k2"})
	s.Reply(t.Context(), "boss", "", a.Thread.ThreadID, inbox.KindAnswer, inbox.Content{Summary: "this one", Body: "details"})
	s.MarkRead(t.Context(), "w", a.Thread.ThreadID, 0)
	s.Claim(t.Context(), "w", old.Thread.ThreadID, 600)
	mail, _ := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "m", Content: inbox.Content{Body: "a note"}})
	task, err := s.Push(t.Context(), inbox.TaskSpec{Name: "t1", Parent: "boss", Owner: "boss"}, "do it")
	if err != nil {
		t.Fatal(err)
	}
	before := views(t, s)
	beforeMail, _ := s.Mailbox(t.Context(), "m", "")
	beforeCursor, _ := s.readCursor(a.Thread.ThreadID, "w")

	// The crash: the threads' files written since the watermark are
	// gone, and so is the index.
	for _, tid := range []string{a.Thread.ThreadID, mail.Thread.ThreadID, task.ThreadID} {
		os.RemoveAll(filepath.Join(db, threadsDir, tid))
	}
	os.Remove(filepath.Join(db, threadsDir, old.Thread.ThreadID, headerLog))
	os.Remove(filepath.Join(db, threadsDir, old.Thread.ThreadID, leaseFile))
	os.RemoveAll(filepath.Join(db, mailboxDir))
	os.RemoveAll(filepath.Join(db, tasksDir))
	os.RemoveAll(filepath.Join(db, idemDir))
	os.RemoveAll(filepath.Join(db, indexDirName))
	crashMachine(t, db, w)

	s = openTest(t, db)
	after := views(t, s)
	for tid, v := range before {
		if !reflect.DeepEqual(after[tid], v) {
			t.Errorf("thread %s after replay:\n got %+v\nwant %+v", tid, after[tid], v)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d threads after replay, want %d", len(after), len(before))
	}
	gotMail, err := s.Mailbox(t.Context(), "m", "")
	if err != nil || len(gotMail) != len(beforeMail) || len(gotMail) == 0 || gotMail[0].Message.MessageID != beforeMail[0].Message.MessageID {
		t.Errorf("mailbox after replay: %+v (%v), want %+v", gotMail, err, beforeMail)
	}
	if c, _ := s.readCursor(a.Thread.ThreadID, "w"); c == nil || c.LastReadSeq != beforeCursor.LastReadSeq {
		t.Errorf("cursor after replay: %+v, want %+v", c, beforeCursor)
	}
	if tk, err := s.TaskByName(t.Context(), "t1"); err != nil || tk.ThreadID != task.ThreadID {
		t.Errorf("task after replay: %+v %v", tk, err)
	}
	// A retried send finds its thread, not a new one.
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "work", Content: inbox.Content{Body: "the body", IdempotencyKey: "k1"}})
	if err != nil || r.Thread.ThreadID != a.Thread.ThreadID || !r.Replayed {
		t.Errorf("retried send after replay: %+v %v", r, err)
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || !rep.Clean() {
		t.Errorf("fsck after replay: %+v %v", rep, err)
	}
	if m, ok := s.readWatermark(); !ok || m.BootID != bootID() {
		t.Errorf("watermark after replay: %+v", m)
	}
}

// TestReplayRollsBackWhatTheLogLost: a change whose log line did not
// reach the disk was never acknowledged; its files, which may have, are
// rolled back to the thread's last logged state.
func TestReplayRollsBackWhatTheLogLost(t *testing.T) {
	s, db := openTemp(t)
	a, _ := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "work"})
	s.Claim(t.Context(), "w", a.Thread.ThreadID, 600)
	want := views(t, s)
	seg := filepath.Join(db, eventsDir, segmentName(1))
	logBefore, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// Two changes whose lines are then lost: one on a known thread, and
	// a new thread.
	s.Reply(t.Context(), "boss", "", a.Thread.ThreadID, inbox.KindAnswer, inbox.Content{Summary: "lost"})
	gone, _ := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "lost thread"})
	if err := os.WriteFile(seg, logBefore, 0o600); err != nil {
		t.Fatal(err)
	}
	crashMachine(t, db, 0)

	s = openTest(t, db)
	got := views(t, s)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after replay:\n got %+v\nwant %+v", got, want)
	}
	if _, err := s.Thread(t.Context(), gone.Thread.ThreadID); err == nil {
		t.Errorf("a thread whose creation the log lost survived replay")
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || !rep.Clean() {
		t.Errorf("fsck after replay: %+v %v", rep, err)
	}
	// The store goes on: new events after the replayed log.
	if _, err := s.Reply(t.Context(), "boss", "", a.Thread.ThreadID, inbox.KindAnswer, inbox.Content{Summary: "again"}); err != nil {
		t.Fatal(err)
	}
}

// TestFormat1IsConverted: a format 1 store (every file fsynced) opens as
// format 2, with its last event as the watermark and its data intact.
func TestFormat1IsConverted(t *testing.T) {
	s, db := openTemp(t)
	a, _ := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "old"})
	want := views(t, s)
	format := filepath.Join(db, formatFile)
	data, _ := os.ReadFile(format)
	os.WriteFile(format, []byte(strings.Replace(string(data), `"version":2`, `"version":1`, 1)), 0o600)
	os.Remove(filepath.Join(db, durableFile))

	s = openTest(t, db)
	if info, err := readFormat(db); err != nil || info.Version != FormatVersion {
		t.Fatalf("format after open: %+v %v", info, err)
	}
	if m, ok := s.readWatermark(); !ok || m.EventID != 1 || m.BootID != bootID() {
		t.Errorf("watermark after conversion: %+v %v", m, ok)
	}
	if got := views(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("converted store: %+v, want %+v", got, want)
	}
	if _, err := s.Claim(t.Context(), "w", a.Thread.ThreadID, 60); err != nil {
		t.Fatal(err)
	}
}

// TestReplayRestoresTeamsAndAcks: teams, a broadcast's mailbox entries
// and owed acknowledgments written after the watermark come back from
// the log after a crash of the machine; an acknowledgment given stays
// given; a team file the log never recorded goes.
func TestReplayRestoresTeamsAndAcks(t *testing.T) {
	s, db := openTemp(t)
	if _, err := s.CreateTeam(t.Context(), "lead", "old", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	w := s.markID.Load()
	s.AddMembers(t.Context(), "lead", "old", []string{"b"})
	s.CreateTeam(t.Context(), "lead", "devs", []string{"a", "b", "c"})
	r, err := s.Send(t.Context(), inbox.SendInput{From: "lead", To: "@devs", Subject: "ack me", Content: inbox.Content{AckRequired: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ack(t.Context(), "a", r.Message.MessageID, "", inbox.Content{}); err != nil {
		t.Fatal(err)
	}
	wantTeams, _ := s.Teams(t.Context())

	// The crash: teams/, mailboxes and acks/ written since the watermark
	// are gone; a team file appears that the log never recorded.
	os.RemoveAll(filepath.Join(db, teamsDir))
	os.RemoveAll(filepath.Join(db, mailboxDir))
	os.RemoveAll(filepath.Join(db, acksDir))
	os.RemoveAll(filepath.Join(db, threadsDir, r.Thread.ThreadID))
	ghost := &teamRecord{Team: inbox.Team{Name: "ghost", Members: []string{"x"}}, EventID: 1 << 40}
	os.MkdirAll(filepath.Join(db, teamsDir), 0o700)
	os.WriteFile(filepath.Join(db, teamsDir, "ghost.json"), encodeLine(ghost.appendJSON(nil)), 0o600)
	crashMachine(t, db, w)

	s = openTest(t, db)
	gotTeams, err := s.Teams(t.Context())
	if err != nil || !reflect.DeepEqual(gotTeams, wantTeams) {
		t.Errorf("teams after replay:\n got %+v %v\nwant %+v", gotTeams, err, wantTeams)
	}
	for _, agent := range []string{"a", "b", "c"} {
		mail, err := s.Mailbox(t.Context(), agent, "")
		if err != nil || len(mail) != 1 || mail[0].Message.MessageID != r.Message.MessageID {
			t.Errorf("%s's mailbox after replay: %+v %v", agent, mail, err)
		}
	}
	for agent, want := range map[string]int{"a": 0, "b": 1, "c": 1} {
		if owed, err := s.Unacknowledged(t.Context(), agent); err != nil || len(owed) != want {
			t.Errorf("%s owes %d after replay (%v), want %d", agent, len(owed), err, want)
		}
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || !rep.Clean() {
		t.Errorf("fsck after replay: %+v %v", rep, err)
	}
}

// TestFsckTeamsAndAcks: fsck finds a team file behind the log and an
// acknowledgment entry that is stale or missing, and repairs them.
func TestFsckTeamsAndAcks(t *testing.T) {
	s, db := openTemp(t)
	s.CreateTeam(t.Context(), "lead", "devs", []string{"a", "b"})
	before, _ := s.Team(t.Context(), "devs")
	s.AddMembers(t.Context(), "lead", "devs", []string{"c"})
	after, _ := s.Team(t.Context(), "devs")
	r, _ := s.Send(t.Context(), inbox.SendInput{From: "lead", To: "@devs", Subject: "ack me", Content: inbox.Content{AckRequired: true}})
	s.Ack(t.Context(), "a", r.Message.MessageID, "", inbox.Content{})
	// A team file rolled back, a settled acknowledgment's entry back, and
	// an owed one's entry gone.
	stale := &teamRecord{Team: *before, EventID: 1}
	os.WriteFile(filepath.Join(db, teamsDir, "devs.json"), encodeLine(stale.appendJSON(nil)), 0o600)
	name := markerName(r.Message)
	os.MkdirAll(filepath.Join(db, acksDir, "a"), 0o700)
	os.Link(filepath.Join(db, threadsDir, r.Thread.ThreadID, msgName(1)), filepath.Join(db, acksDir, "a", name))
	os.Remove(filepath.Join(db, acksDir, "b", name))

	rep, err := s.Fsck(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	var checks []string
	for _, f := range rep.Findings {
		checks = append(checks, f.Check)
	}
	for _, want := range []string{"stale_team", "stale_ack_entry", "missing_ack_entry"} {
		if !strings.Contains(strings.Join(checks, " "), want) {
			t.Errorf("fsck found %v, not %s", checks, want)
		}
	}
	if rep, err = s.Fsck(t.Context(), true); err != nil || !rep.Clean() {
		t.Fatalf("repair: %+v %v", rep, err)
	}
	if rep, err = s.Fsck(t.Context(), false); err != nil || len(rep.Findings) != 0 {
		t.Errorf("after repair: %+v %v", rep, err)
	}
	if got, _ := s.Team(t.Context(), "devs"); !reflect.DeepEqual(got, after) {
		t.Errorf("team after repair %+v, want %+v", got, after)
	}
	for agent, want := range map[string]int{"a": 0, "b": 1, "c": 1} {
		if owed, _ := s.Unacknowledged(t.Context(), agent); len(owed) != want {
			t.Errorf("%s owes %d after repair, want %d", agent, len(owed), want)
		}
	}
}

// TestReplayWithAnArchivedThread: a thread read, finished and archived,
// then a reboot that replays the log from before all that: the store
// opens (replay used to write the restored cursor into the archived
// thread's old directory and fail every command), the archived thread
// still shows with its cursor, and fsck is clean.
func TestReplayWithAnArchivedThread(t *testing.T) {
	db := initTemp(t)
	// The clock moves on before the last send, so that archive takes the
	// thread but leaves the log segment (it holds a newer event) live.
	now := time.Now()
	s, err := Open(t.Context(), db, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "job"})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	if _, err := s.Claim(t.Context(), "w", tid, 600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Done(t.Context(), "w", tid, 0, inbox.Content{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkRead(t.Context(), "boss", tid, 0); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "next"}); err != nil {
		t.Fatal(err)
	}
	a, err := s.Archive(t.Context(), time.Minute, nil)
	if err != nil || len(a.Threads) != 1 || len(a.Segments) != 0 {
		t.Fatalf("archive: %v %+v", err, a)
	}
	crashMachine(t, db, 0)
	s2, err := Open(t.Context(), db, Options{})
	if err != nil {
		t.Fatalf("open after the reboot: %v", err)
	}
	v, err := s2.Show(t.Context(), tid)
	if err != nil || v.Thread.Status != inbox.StatusDone {
		t.Fatalf("archived thread after replay: %v %+v", err, v)
	}
	if _, err := s2.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "after"}); err != nil {
		t.Fatalf("send after the reboot: %v", err)
	}
	if rep, err := s2.Fsck(t.Context(), false); err != nil || !rep.Clean() {
		t.Fatalf("fsck: %v %+v", err, rep)
	}
}

// TestNoCheckpointPastASkippedReplay: a store that needs a replay (the
// machine rebooted) but is opened while a top-level folder is a symbolic
// link skips the replay; a checkpoint then must not advance the
// watermark, or what replay should restore would never be restored.
// Once the link is gone, the next open replays and the lost message is
// back.
func TestNoCheckpointPastASkippedReplay(t *testing.T) {
	s, db := openTemp(t)
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "job", Content: inbox.Content{Body: "keep me"}})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	// The power cut took the message file (its event is in the log).
	os.Remove(filepath.Join(db, threadsDir, tid, msgName(1)))
	os.Remove(filepath.Join(db, threadsDir, tid, headerLog))
	crashMachine(t, db, 0)
	// A top-level folder planted as a link.
	elsewhere := t.TempDir()
	if err := os.Rename(filepath.Join(db, sessionsDir), filepath.Join(elsewhere, "sessions")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(elsewhere, "sessions"), 0o700)
	if err := os.Symlink(filepath.Join(elsewhere, "sessions"), filepath.Join(db, sessionsDir)); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(t.Context(), db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s2.Checkpoint() // the daemon's sweep
	w, _ := s2.readWatermark()
	if w.EventID != 0 || w.BootID == bootID() {
		t.Fatalf("the watermark advanced to %+v past a replay that did not run", w)
	}
	// fsck --repair removes the link; the next open replays.
	if _, err := s2.Fsck(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	s3 := openTest(t, db)
	v, err := s3.Show(t.Context(), tid)
	if err != nil || len(v.Messages) != 1 || v.Messages[0].Body != "keep me" {
		t.Fatalf("the message replay should restore: %v %+v", err, v)
	}
}
