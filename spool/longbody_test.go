package spool

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/testproc"
)

// Inline bodies from just under 1 MiB to the 64 MiB inline limit, whose
// event lines are as long or longer: every reader of the log reads them
// back (the next change on the thread, fsck, fsck --repair, search,
// replay after a crash, show, events).

// longBody is a body of exactly n bytes of words that starts with
// "first<tag>" and ends with "last<tag>"; with escaped, its filler is
// control characters, which JSON writes as six bytes each (\u0001).
func longBody(n int, tag string, escaped bool) string {
	head, tail := "first"+tag+" ", " last"+tag
	fill := "lorem ipsum dolor\n"
	if escaped {
		fill = "\x01\x02\x03 \x1f"
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(head)
	for b.Len() < n-len(tail) {
		k := min(len(fill), n-len(tail)-b.Len())
		b.WriteString(fill[:k])
	}
	b.WriteString(tail)
	if b.Len() != n {
		panic(fmt.Sprintf("a body of %d bytes, want %d", b.Len(), n))
	}
	return b.String()
}

type bodySize struct {
	name    string
	n       int
	escaped bool
}

// longBodySizes: around 1 MiB, 16 MiB, and in the long run 64 MiB (the
// inline limit) of plain text and of control characters, the longest
// line a body can make (6 × 64 MiB).
func longBodySizes() []bodySize {
	sizes := []bodySize{{"1MiB-1", 1<<20 - 1, false}, {"1MiB", 1 << 20, false}, {"1MiB+1", 1<<20 + 1, false},
		{"1MiB-escaped", 1 << 20, true}, {"16MiB", 16 << 20, false}}
	if testproc.Long {
		sizes = append(sizes, bodySize{"64MiB", inbox.MaxInline, false}, bodySize{"64MiB-escaped", inbox.MaxInline, true})
	}
	return sizes
}

func sum(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }

// wantBodies checks that the thread's messages have the bodies want (by
// their SHA-256), none of them damaged.
func wantBodies(t *testing.T, s *Store, tid string, want []string, when string) {
	t.Helper()
	v, err := s.Show(t.Context(), tid)
	if err != nil {
		t.Fatalf("%s: show: %v", when, err)
	}
	if len(v.Messages) != len(want) {
		t.Fatalf("%s: %d messages, want %d", when, len(v.Messages), len(want))
	}
	for i, m := range v.Messages {
		if m.Damaged || m.Body != want[i] {
			t.Errorf("%s: message %d: damaged %v, a body of %d bytes (sha256 %.12s), want %d bytes (%.12s)",
				when, i+1, m.Damaged, len(m.Body), sum(m.Body), len(want[i]), sum(want[i]))
		}
	}
}

// wantEvents checks that the log holds exactly the events of types for
// thread tid, each message added once.
func wantEvents(t *testing.T, s *Store, tid string, types []string, when string) {
	t.Helper()
	var got []string
	err := s.Events(t.Context(), 0, func(ev *inbox.Event) bool {
		if ev.ThreadID == tid {
			got = append(got, ev.EventType)
		}
		return true
	})
	if err != nil {
		t.Fatalf("%s: events: %v", when, err)
	}
	if !reflect.DeepEqual(got, types) {
		t.Errorf("%s: the thread's events are %v, want %v", when, got, types)
	}
}

func wantClean(t *testing.T, s *Store, when string) {
	t.Helper()
	rep, err := s.Fsck(t.Context(), false)
	if err != nil || !rep.Clean() {
		t.Errorf("%s: fsck: %v %+v", when, err, rep)
	}
}

// wantFound checks that a search for word finds exactly message mid, as
// a search narrowed to the thread (a scan of its messages) does.
func wantFound(t *testing.T, s *Store, tid, word, mid, when string) {
	t.Helper()
	for _, f := range []inbox.SearchFilter{{Query: word}, {Query: word, ThreadID: tid}} {
		hs, err := s.Search(t.Context(), f)
		if err != nil {
			t.Errorf("%s: search %+v: %v", when, f, err)
			continue
		}
		if len(hs) != 1 || hs[0].Message.MessageID != mid {
			var ids []string
			for _, h := range hs {
				ids = append(ids, h.Message.MessageID)
			}
			t.Errorf("%s: search %+v found %v, want [%s]", when, f, ids, mid)
		}
	}
}

// TestLongBodies: for each size, a thread whose send, reply and update
// carry a body of that size, each followed by a change on the thread;
// then search, show, events, fsck, replay after a crash of the machine
// and fsck --repair of each message file.
func TestLongBodies(t *testing.T) {
	for _, sz := range longBodySizes() {
		t.Run(sz.name, func(t *testing.T) {
			s, db := openTemp(t)
			if err := s.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			w := s.markID.Load()
			b1, b2, b3 := longBody(sz.n, "one", sz.escaped), longBody(sz.n, "two", sz.escaped), longBody(sz.n, "three", sz.escaped)
			r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "big", Content: inbox.Content{Body: b1}})
			if err != nil {
				t.Fatal(err)
			}
			tid := r.Thread.ThreadID
			mids := []string{r.Message.MessageID}
			wantFound(t, s, tid, "lastone", mids[0], "a search that builds the index")
			// The change after each long line: the writer must find
			// the thread's last event in the log, not append it again.
			if _, err := s.Claim(t.Context(), "w", tid, 600); err != nil {
				t.Fatal(err)
			}
			wantEvents(t, s, tid, []string{"thread_created", "thread_claimed"}, "claim after a long send")
			r2, err := s.Reply(t.Context(), "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: "more", Body: b2})
			if err != nil {
				t.Fatal(err)
			}
			mids = append(mids, r2.Message.MessageID)
			wantFound(t, s, tid, "lasttwo", mids[1], "a search that catches up")
			if _, err := s.Update(t.Context(), "w", tid, inbox.StatusInProgress, 0, inbox.Content{Summary: "on it"}); err != nil {
				t.Fatal(err)
			}
			r4, err := s.Update(t.Context(), "w", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "which?", Body: b3})
			if err != nil {
				t.Fatal(err)
			}
			mids = append(mids, "", r4.Message.MessageID)
			r5, err := s.Reply(t.Context(), "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: "this one"})
			if err != nil {
				t.Fatal(err)
			}
			mids = append(mids, r5.Message.MessageID)
			types := []string{"thread_created", "thread_claimed", "message_added", "thread_updated", "thread_updated", "message_added"}
			bodies := []string{b1, b2, "", b3, ""}
			wantEvents(t, s, tid, types, "after the changes")
			wantBodies(t, s, tid, bodies, "show")
			wantClean(t, s, "after the changes")
			wantFound(t, s, tid, "firstone", mids[0], "search")
			wantFound(t, s, tid, "lastthree", mids[3], "search")
			// With nothing new, a search keeps the index it has.
			idx := searchFiles(t, db)
			wantFound(t, s, tid, "lastthree", mids[3], "search again")
			if again := searchFiles(t, db); !reflect.DeepEqual(again, idx) {
				t.Errorf("a search with nothing new in the log rewrote the index: %v, then %v", idx, again)
			}

			// A crash of the machine loses every file written since
			// the watermark; replay restores them from the log.
			if err := os.RemoveAll(filepath.Join(db, threadsDir, tid)); err != nil {
				t.Fatal(err)
			}
			os.RemoveAll(filepath.Join(db, indexDirName))
			crashMachine(t, db, w)
			s = openTest(t, db)
			wantBodies(t, s, tid, bodies, "after replay")
			wantEvents(t, s, tid, types, "after replay")
			wantClean(t, s, "after replay")

			// Each long message's file damaged, then rebuilt whole
			// from its line by fsck --repair.
			for _, seq := range []int{1, 2, 4} {
				p := filepath.Join(db, threadsDir, tid, msgName(seq))
				if err := os.Truncate(p, 100); err != nil {
					t.Fatal(err)
				}
			}
			mustRepairClean(t, s, "damaged_message")
			wantBodies(t, s, tid, bodies, "after repairing damaged messages")
			if err := os.Remove(filepath.Join(db, threadsDir, tid, msgName(2))); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(db, threadsDir, tid, msgName(2)), 0o600); err != nil {
				t.Fatal(err)
			}
			mustRepairClean(t, s, "planted_file")
			wantBodies(t, s, tid, bodies, "after replacing a FIFO")
			wantEvents(t, s, tid, types, "after the repairs")
		})
	}
}

// searchFiles are the search index's files, each with its inode.
func searchFiles(t *testing.T, db string) map[string]uint64 {
	t.Helper()
	ps, _ := filepath.Glob(filepath.Join(db, indexDirName, "search-*.idx"))
	out := map[string]uint64{}
	for _, p := range ps {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = fi.Sys().(*syscall.Stat_t).Ino
	}
	if len(out) == 0 {
		t.Fatal("no search index file after a search")
	}
	return out
}

// TestRepairNextToLongLines: damage inside a segment that holds long
// lines (the line of an event between two long messages garbled, then
// replaced by a shorter one, which moves what follows): fsck --repair
// restores the event under its id, the long lines around it stay whole
// (a message rebuilt from each is its body byte for byte), and the
// segment is rewritten without being held in memory.
func TestRepairNextToLongLines(t *testing.T) {
	const n = 4 << 20 // three lines in one segment (DefaultSegmentBytes)
	s, db := openTemp(t)
	b1, b2 := longBody(n, "one", false), longBody(n, "two", false)
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "big", Content: inbox.Content{Body: b1}})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	if _, err := s.Claim(t.Context(), "w", tid, 600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reply(t.Context(), "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: "more", Body: b2}); err != nil {
		t.Fatal(err)
	}
	bodies := []string{b1, b2}
	// The claim's event is restored as lost: no header or message names
	// it.
	types := []string{"thread_created", "message_added"}
	seg := newestSegmentOf(t, db)
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// The claim's line: the second.
	i := strings.IndexByte(string(data), '\n') + 1
	j := i + strings.IndexByte(string(data[i:]), '\n')
	damage := []struct {
		name string
		line []byte
	}{
		{"garbled", []byte(strings.Repeat("#", j-i))},
		{"shorter", []byte("garbage")},
	}
	for _, d := range damage {
		f, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		a := strings.IndexByte(string(f), '\n') + 1
		b := a + strings.IndexByte(string(f[a:]), '\n')
		out := append(append(append([]byte{}, f[:a]...), d.line...), f[b:]...)
		if err := os.WriteFile(seg, out, 0o600); err != nil {
			t.Fatal(err)
		}
		f, out = nil, nil
		var rep *inbox.FsckReport
		used := allocated(func() { rep, err = s.Fsck(t.Context(), true) })
		if err != nil {
			t.Fatal(err)
		}
		restored := false
		for _, fd := range rep.Findings {
			restored = restored || fd.Check == "corrupt_event_log" && fd.Repaired && strings.Contains(fd.Detail, "restored under their ids")
		}
		if !restored {
			t.Errorf("%s: fsck --repair did not restore the damaged line: %+v", d.name, rep.Findings)
		}
		// fsck reads each long message's file and its line (about 4n
		// in all); copies of the segment (2n each) on top of that are
		// what streaming it avoids.
		if limit := uint64(5 * n); used > limit {
			t.Errorf("%s: fsck --repair allocated %d MiB, more than %d MiB", d.name, used>>20, limit>>20)
		}
		wantClean(t, s, d.name+": after the repair")
		wantEvents(t, s, tid, types, d.name+": after the repair")
		for _, seq := range []int{1, 2} {
			if err := os.Truncate(filepath.Join(db, threadsDir, tid, msgName(seq)), 10); err != nil {
				t.Fatal(err)
			}
		}
		mustRepairClean(t, s, "damaged_message")
		wantBodies(t, s, tid, bodies, d.name+": messages rebuilt from the long lines")
	}
}

// newestSegmentOf is the path of the newest segment of the log of db.
func newestSegmentOf(t *testing.T, db string) string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(db, eventsDir, "*"+segSuffix))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	return segs[len(segs)-1]
}
