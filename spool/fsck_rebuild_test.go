package spool

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/inbox-dev/inbox"
)

// rebuildStore makes a store with one thread of three messages (the
// first with an initial header only until the claim) and returns it.
func rebuildStore(t *testing.T) (*Store, string, string) {
	t.Helper()
	s, db := openTemp(t)
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "job", Content: inbox.Content{Body: "the first body"}})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	if _, err := s.Reply(t.Context(), "boss", "w", tid, inbox.KindAnswer, inbox.Content{Summary: "s2", Body: "the second body", PayloadJSON: `{"n":2}`}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(t.Context(), "w", tid, 600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(t.Context(), "w", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "which?", Body: "the third body"}); err != nil {
		t.Fatal(err)
	}
	return s, db, tid
}

// mustRepairClean runs fsck --repair, wants the named checks repaired,
// then wants a clean fsck.
func mustRepairClean(t *testing.T, s *Store, checks ...string) {
	t.Helper()
	rep, err := s.Fsck(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if !f.Repaired && f.Check != "symlink" {
			t.Errorf("fsck --repair left a finding unrepaired: %+v", f)
		}
	}
	for _, c := range checks {
		found := false
		for _, f := range rep.Findings {
			if f.Check == c {
				found = true
				if !f.Repaired {
					t.Errorf("%s found but not repaired: %+v", c, f)
				}
			}
		}
		if !found {
			t.Errorf("fsck --repair did not report %s: %+v", c, rep.Findings)
		}
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || !rep.Clean() {
		t.Fatalf("fsck after the repair: %v %+v", err, rep)
	}
}

// wantWhole checks that the thread shows every message whole.
func wantWhole(t *testing.T, s *Store, tid string, want *inbox.ThreadView) {
	t.Helper()
	v, err := s.Show(t.Context(), tid)
	if err != nil {
		t.Fatal(err)
	}
	if v.Thread.Status != want.Thread.Status || v.Thread.MessageCount != want.Thread.MessageCount || len(v.Messages) != len(want.Messages) {
		t.Fatalf("thread after repair: %+v, want %+v", v.Thread, want.Thread)
	}
	for i, m := range v.Messages {
		w := want.Messages[i]
		if m.Damaged || m.MessageID != w.MessageID || m.Body != w.Body || m.Summary != w.Summary || string(m.PayloadJSON) != string(w.PayloadJSON) {
			t.Errorf("message %d after repair: %+v, want %+v", i+1, m, w)
		}
	}
}

// TestFsckRebuildsMessagesFromTheLog: a message file truncated, garbled,
// removed, or replaced by a FIFO is rebuilt whole by fsck --repair from
// the log line that carries it (format 2), not replaced by a stand-in
// whose body is lost.
func TestFsckRebuildsMessagesFromTheLog(t *testing.T) {
	damage := map[string]func(p string) error{
		"truncated": func(p string) error { return os.Truncate(p, 20) },
		"garbled":   func(p string) error { return os.WriteFile(p, []byte("{\"message_id\": garbage"), 0o600) },
		"removed":   os.Remove,
		"fifo": func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return syscall.Mkfifo(p, 0o600)
		},
	}
	for name, do := range damage {
		for _, seq := range []int{1, 2, 3} {
			t.Run(name+"/"+msgName(seq), func(t *testing.T) {
				s, db, tid := rebuildStore(t)
				want, err := s.Show(t.Context(), tid)
				if err != nil {
					t.Fatal(err)
				}
				if err := do(filepath.Join(db, threadsDir, tid, msgName(seq))); err != nil {
					t.Fatal(err)
				}
				check := "damaged_message"
				switch name {
				case "removed":
					check = "missing_message"
				case "fifo":
					check = "planted_file"
				}
				mustRepairClean(t, s, check)
				wantWhole(t, s, tid, want)
			})
		}
	}
}

// TestFsckRebuildsTheHeaderFromTheLog: thread.log garbled, or replaced by
// a FIFO or a symbolic link: the header is rebuilt from the thread's
// newest logged state (never the stale initial header in the first
// message), and a link's target is left untouched.
func TestFsckRebuildsTheHeaderFromTheLog(t *testing.T) {
	for _, name := range []string{"garbled", "fifo", "symlink"} {
		t.Run(name, func(t *testing.T) {
			s, db, tid := rebuildStore(t)
			want, err := s.Show(t.Context(), tid)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(db, threadsDir, tid, headerLog)
			victim := filepath.Join(t.TempDir(), "victim")
			os.WriteFile(victim, []byte("not the store's"), 0o600)
			switch name {
			case "garbled":
				err = os.WriteFile(p, []byte(strings.Repeat("x", 300)+"\n"), 0o600)
			case "fifo":
				os.Remove(p)
				err = syscall.Mkfifo(p, 0o600)
			case "symlink":
				os.Remove(p)
				err = os.Symlink(victim, p)
			}
			if err != nil {
				t.Fatal(err)
			}
			check := map[string]string{"garbled": "damaged_header", "fifo": "planted_file", "symlink": "symlink"}[name]
			mustRepairClean(t, s, check)
			wantWhole(t, s, tid, want)
			if b, _ := os.ReadFile(victim); string(b) != "not the store's" {
				t.Errorf("the link's target was changed: %q", b)
			}
		})
	}
}

// TestFsckBringsACursorUpToItsEvent: a mark-read whose event committed
// but whose cursor line was never written (killed between the two) is
// found by fsck (cursor_behind_log) and the cursor moved on repair.
func TestFsckBringsACursorUpToItsEvent(t *testing.T) {
	s, _, tid := rebuildStore(t)
	markReadDies = func() bool { return true }
	_, err := s.MarkRead(t.Context(), "boss", tid, 0)
	markReadDies = nil
	if err == nil {
		t.Fatal("the mark-read should have died between its writes")
	}
	if c, _ := s.readCursor(tid, "boss"); c != nil {
		t.Fatalf("the cursor moved although its line was never written: %+v", c)
	}
	mustRepairClean(t, s, "cursor_behind_log")
	if c, _ := s.readCursor(tid, "boss"); c == nil || c.LastReadSeq != 3 {
		t.Fatalf("cursor after the repair: %+v, want #3", c)
	}
}
