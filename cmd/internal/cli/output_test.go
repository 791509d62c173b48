package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/inbox-dev/inbox"
)

// TestAppendValueMatchesEncodingJSON: the direct writer of responses
// gives the bytes encoding/json gives, for every kind of value it handles
// (nil pointers and slices included).
func TestAppendValueMatchesEncodingJSON(t *testing.T) {
	th := &inbox.Thread{ThreadID: "thr_1", Subject: "a \"quoted\" <subject>\n\u2028", MessageCount: 2, LastEventID: 9}
	msg := &inbox.Message{MessageID: "msg_1", Seq: 1, Body: "b\x01\xff", PayloadJSON: json.RawMessage(`{"a":[1,2]}`),
		Artifacts: []inbox.Artifact{{Path: "p", MetadataJSON: json.RawMessage(`{}`)}}, Status: "done"}
	bare := &inbox.Message{MessageID: "msg_2"}
	lease := &inbox.Lease{ThreadID: "thr_1", AgentID: "w", LeaseToken: 3, ExpiresAt: "x"}
	y := "y"
	released := &inbox.Lease{AgentID: "w", ReleasedAt: &y}
	ev := &inbox.Event{EventID: 5, PayloadJSON: json.RawMessage(`{}`), Agent: "w", Kind: "answer"}
	cur := &inbox.Cursor{ThreadID: "thr_1", LastReadSeq: 2}
	var nt *inbox.Thread
	var nm *inbox.Message
	var nl *inbox.Lease
	var ne *inbox.Event
	var nc *inbox.Cursor
	nested := &obj{}
	nested.set("k", "v").set("n", 1)
	for _, v := range []any{nil, "", "é\t\"\\</>&", true, false, 0, -7, int64(1 << 62),
		[]string(nil), []string{}, []string{"a", "b\n"}, map[string]string(nil), map[string]string{"z": "1", "a": "2"},
		th, nt, msg, bare, nm, lease, released, nl, ev, ne, cur, nc,
		[]*inbox.Thread(nil), []*inbox.Thread{}, []*inbox.Thread{th, nil},
		[]*inbox.Message{msg, bare}, []*inbox.Event{ev}, nested,
		map[string]int{"fallback": 1}, struct{ X int }{3}} {
		got, err := appendValue(nil, v)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		want, err := encodeJSON(v)
		if err != nil {
			t.Fatalf("encoding/json %#v: %v", v, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%#v:\n got %s\nwant %s", v, got, want)
		}
	}
}

// TestHumanWriter: what reaches people is escaped however the renderer
// splits its writes, a character cut between two writes included, and an
// incomplete character left at the end shows as its bytes.
func TestHumanWriter(t *testing.T) {
	in := "ok 日本\x1b[31m\u009b\u202e\n\tbody\r\xff end \xe6\x97"
	want := "ok 日本\\x1b[31m\\u009b\\u202e\n\tbody\\r\\xff end \\xe6\\x97"
	for chunk := 1; chunk <= len(in); chunk++ {
		var out bytes.Buffer
		w := newHumanWriter(&out)
		for i := 0; i < len(in); i += chunk {
			p := []byte(in[i:min(i+chunk, len(in))])
			if n, err := w.Write(p); n != len(p) || err != nil {
				t.Fatalf("chunk %d: Write = %d, %v; want %d, nil", chunk, n, err, len(p))
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != want {
			t.Errorf("chunk %d: got %q, want %q", chunk, got, want)
		}
	}
}

// TestOneLine: a one-line field is escaped, newlines and tabs too, its
// spaces collapsed, and cut to n characters never inside an escape.
func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"  plain   words ", 60, "plain words"},
		{"a\nFAKE\tcol", 60, `a\nFAKE\tcol`},
		{"red \x1b[31m", 60, `red \x1b[31m`},
		{"abcdefghij", 5, "abcd…"},
		{"abc\x1b[31m", 5, "abc…"},
		{"ab\x1b[31m", 7, `ab\x1b…`},
		{"日本語のテキスト", 4, "日本語…"},
	} {
		if got := oneLine(tc.in, tc.n); got != tc.want {
			t.Errorf("oneLine(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// BenchmarkHumanWriter: a 44 KB body shown by show, an escape on every
// line, in one write as show's buffer hands it over.
func BenchmarkHumanWriter(b *testing.B) {
	text := bytes.Repeat([]byte("    │ a line of a long body: the quick brown fox jumps over the lazy dog, \x1b[31mred\x1b[0m and a\ttab\n"), 400)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		w := newHumanWriter(io.Discard)
		w.Write(text)
		w.Flush()
	}
}
