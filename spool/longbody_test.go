package spool

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
// lines, repaired by fsck --repair under the events' own ids. The segment
// holds a send and a reply of 4 MiB each with a claim between them. The
// claim's line garbled keeps its length: its stand-in is padded to it and
// no position moves. The claim's line replaced by a shorter one: its
// stand-in is longer than the damage, what follows moves, and so does the
// header that points past it. The header's own event and the line after
// it garbled together: both are restored in the damaged bytes, and the
// header points where its event's line ends now. The send's long line damaged in
// its middle: the event rebuilt from the message is padded to the line's
// 4 MiB. After each repair the long lines around the damage stay whole (a
// message rebuilt from each is its body byte for byte), the next change
// on the thread finds its last event where the header says (no event is
// logged again), and the segment is rewritten without being held in
// memory.
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
	seg := newestSegmentOf(t, db)
	// The claim's event is restored as lost: no header or message names
	// it, and the thread's events no longer list it.
	types := []string{"thread_created", "message_added"}

	// lineBounds is where line i (from 0) of the segment starts and ends
	// (its newline excluded).
	lineBounds := func(f []byte, i int) (int, int) {
		a := 0
		for range i {
			a += bytes.IndexByte(f[a:], '\n') + 1
		}
		return a, a + bytes.IndexByte(f[a:], '\n')
	}
	damage := []struct {
		name    string
		damage  func(f []byte) []byte
		shifted bool
		rebuilt []int // the messages whose line is whole, damaged then rebuilt from it
	}{
		{"the claim garbled", func(f []byte) []byte {
			a, b := lineBounds(f, 1)
			return slices.Concat(f[:a], bytes.Repeat([]byte("#"), b-a), f[b:])
		}, false, []int{1, 2}},
		{"the claim shorter", func(f []byte) []byte {
			a, b := lineBounds(f, 1)
			return slices.Concat(f[:a], []byte("garbage"), f[b:])
		}, true, []int{1, 2}},
		{"the header's event and the next garbled", func(f []byte) []byte {
			// The update after the last repair and the send of
			// another thread after it (a second send follows): one
			// stretch of damage, restored as two lines padded to its
			// length, the header's no longer last.
			k := bytes.Count(f, []byte("\n"))
			a, _ := lineBounds(f, k-3)
			_, b := lineBounds(f, k-2)
			for i := a; i < b; i++ {
				if f[i] != '\n' {
					f[i] = '#'
				}
			}
			return f
		}, false, []int{1, 2}},
		{"the send's long line garbled", func(f []byte) []byte {
			a, b := lineBounds(f, 0)
			f[a+(b-a)/2] ^= 0x20
			return f
		}, false, []int{2}},
	}
	for _, d := range damage {
		if strings.HasPrefix(d.name, "the header's event") {
			for range 2 {
				if _, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "v", Subject: "other"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		f, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		out := d.damage(f)
		if err := os.WriteFile(seg, out, 0o600); err != nil {
			t.Fatal(err)
		}
		damaged := int64(len(out))
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
		fi, err := os.Stat(seg)
		if err != nil {
			t.Fatal(err)
		}
		if moved := fi.Size() != damaged; moved != d.shifted {
			t.Errorf("%s: the repaired segment is %d bytes, the damaged one %d: want it moved %v", d.name, fi.Size(), damaged, d.shifted)
		}
		// The header names the reply's event and where its line ends,
		// moved with the rewrite.
		h, err := s.readHeader(tid)
		if err != nil {
			t.Fatal(err)
		}
		head, _, ok, garbled, err := s.log.headAt(h.LogPos)
		if id, _ := lineID(head); err != nil || !ok || garbled || id != h.LastEventID {
			t.Errorf("%s: the header's last event %d at %v: a line of event %d there, ok %v garbled %v err %v",
				d.name, h.LastEventID, h.LogPos, id, ok, garbled, err)
		}
		wantClean(t, s, d.name+": after the repair")
		wantEvents(t, s, tid, types, d.name+": after the repair")
		for _, seq := range d.rebuilt {
			if err := os.Truncate(filepath.Join(db, threadsDir, tid, msgName(seq)), 10); err != nil {
				t.Fatal(err)
			}
		}
		mustRepairClean(t, s, "damaged_message")
		wantBodies(t, s, tid, bodies, d.name+": messages rebuilt from the long lines")
		// The next change on the thread logs its own event only.
		if _, err := s.Update(t.Context(), "w", tid, inbox.StatusInProgress, 0, inbox.Content{Summary: d.name}); err != nil {
			t.Fatal(err)
		}
		types = append(types, "thread_updated")
		bodies = append(bodies, "")
		wantEvents(t, s, tid, types, d.name+": after a change")
		wantClean(t, s, d.name+": after a change")
		if got := newestSegmentOf(t, db); got != seg {
			seg = got // the change started a segment: damage it next
		}
	}
}

// TestFsckHeaderLogPos: a header whose log_pos does not point where its
// last event's line ends (here inside that line, a long one) makes the
// next change on the thread log the event again: fsck reports it, and
// fsck --repair points the header at the line.
func TestFsckHeaderLogPos(t *testing.T) {
	s, _ := openTemp(t)
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "big", Content: inbox.Content{Body: longBody(1<<20+1, "one", false)}})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	h, err := s.readHeader(tid)
	if err != nil {
		t.Fatal(err)
	}
	n := h.clone()
	n.LogPos.Offset -= 1 << 19
	if _, err := s.appendHeader(s.threadDir(tid), n, nil, true); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Fsck(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Check != "stale_header" || !strings.Contains(rep.Findings[0].Detail, "log_pos") {
		t.Errorf("fsck of a header pointing inside its event's line: %+v, want one stale_header", rep.Findings)
	}
	mustRepairClean(t, s, "stale_header")
	if _, err := s.Claim(t.Context(), "w", tid, 600); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, s, tid, []string{"thread_created", "thread_claimed"}, "a claim after the repair")
	wantClean(t, s, "after the claim")
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
