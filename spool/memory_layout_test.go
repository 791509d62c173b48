package spool

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
)

// bigText is n bytes or so of text with everything JSON escapes.
func bigText(n int) string {
	unit := "line of text \"quoted\" \\ back\tslash é 日本 \u2028 \x01\n"
	return strings.Repeat(unit, n/len(unit)+1)
}

// A change that adds a message writes its event line and its file from
// one encoding (tx.event, messageFileData): both must be exactly what
// the generated encoders write, large content or small, a new thread's
// first message (header first) or a later one.
func TestMessageFileAndLineAreTheEncoders(t *testing.T) {
	s, db := openTemp(t)
	big := bigText(3 << 20)
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "big", Content: inbox.Content{
		Body: big, PayloadJSON: `{"k":"` + strings.Repeat("v", 2<<20) + `"}`, IdempotencyKey: "k1"}})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	if _, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "small"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(t.Context(), "w", tid, 60); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reply(t.Context(), "w", "", tid, inbox.KindQuestion, inbox.Content{Body: big[:2<<20], IdempotencyKey: "k2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reply(t.Context(), "w", "", tid, inbox.KindProgress, inbox.Content{Summary: "tiny"}); err != nil {
		t.Fatal(err)
	}
	for seq := 1; seq <= 3; seq++ {
		data, err := os.ReadFile(filepath.Join(db, threadsDir, tid, msgName(seq)))
		if err != nil {
			t.Fatal(err)
		}
		var mf msgFile
		if err := mf.decodeJSON(data); err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		if again := mf.appendJSON(nil); !bytes.Equal(again, data) {
			t.Errorf("message %d: the file is not what msgFile's encoder writes (%d bytes, want %d)", seq, len(data), len(again))
		}
		if seq == 1 && !bytes.HasPrefix(data, []byte(`{"thread_header":{`)) {
			t.Errorf("the first message does not start with its header: %.40s", data)
		}
		if len(mf.Body) > largeContent {
			if got, want := mf.sizeHint(), len(mf.appendJSON(nil)); got != want {
				t.Errorf("message %d: sizeHint %d, want %d", seq, got, want)
			}
		}
	}
	seg, err := os.ReadFile(filepath.Join(db, eventsDir, segmentName(1)))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(seg, []byte("\n"))
	lines = lines[:len(lines)-1]
	if len(lines) < 5 {
		t.Fatalf("%d lines, want 5 or more", len(lines))
	}
	for i, line := range lines {
		body, ok := checkLine(line[:len(line)-1])
		if !ok {
			t.Fatalf("line %d does not check", i+1)
		}
		var le logEvent
		if err := le.decodeJSON(body); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if again := encodeEvent(&le); !bytes.Equal(again, line) {
			t.Errorf("line %d is not what the encoders write (%d bytes, want %d)", i+1, len(line), len(again))
		}
	}
}

// A first message written before the header came first (header last,
// after a large body) still gives its thread's header to every reader.
func TestHeaderOfAnOlderFirstMessage(t *testing.T) {
	s, db := openTemp(t)
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: "w", Subject: "old", Content: inbox.Content{Body: bigText(2 << 20)}})
	if err != nil {
		t.Fatal(err)
	}
	tid := r.Thread.ThreadID
	p := filepath.Join(db, threadsDir, tid, msgName(1))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var mf msgFile
	if err := mf.decodeJSON(data); err != nil {
		t.Fatal(err)
	}
	h := mf.InitialHeader
	mf.InitialHeader = nil
	old := mf.appendJSON(nil)
	old = append(append(append(old[:len(old)-1], `,"thread_header":`...), h.appendJSON(nil)...), '}')
	if err := os.WriteFile(p, old, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.readHeader(tid)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.appendJSON(nil), h.appendJSON(nil)) {
		t.Errorf("header read from the old layout:\n%s\nwant\n%s", got.appendJSON(nil), h.appendJSON(nil))
	}
	ts, err := s.Fetch(t.Context(), "w", nil, 10, false)
	if err != nil || len(ts) != 1 || ts[0].Subject != "old" {
		t.Fatalf("fetch = %v, %v; want the thread", ts, err)
	}
	v, err := s.Show(t.Context(), tid)
	if err != nil || v.Messages[0].Body != bigText(2<<20) {
		t.Fatalf("show: %v", err)
	}
}

// A header longer than the first read of the file (a thread offered to
// hundreds of agents) is read on from the file.
func TestLongHeaderIsReadWhole(t *testing.T) {
	s, db := openTemp(t)
	var to []string
	for i := range 400 {
		to = append(to, fmt.Sprintf("agent-%03d-%s", i, strings.Repeat("x", 40)))
	}
	r, err := s.Send(t.Context(), inbox.SendInput{From: "boss", To: strings.Join(to, ","), Subject: "for everyone"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(db, threadsDir, r.Thread.ThreadID, msgName(1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 16<<10 {
		t.Fatalf("the first message is %d bytes; the test wants a header past 16 KiB", len(data))
	}
	var mf msgFile
	if err := mf.decodeJSON(data); err != nil {
		t.Fatal(err)
	}
	h, err := s.readHeader(r.Thread.ThreadID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.appendJSON(nil), mf.InitialHeader.appendJSON(nil)) || len(h.Recipients) != 400 {
		t.Errorf("header read: %d recipients, want 400 and the file's header", len(h.Recipients))
	}
}
