package jsonrec_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/internal/jsonrec"
	"github.com/inbox-dev/inbox/internal/jsonrec/jsonrectest"
)

func FuzzString(f *testing.F) {
	for _, s := range jsonrectest.Pieces {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := jsonrectest.Marshal(t, s)
		if got := jsonrec.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		var back, stdBack string
		if err := jsonrec.Decode(want, func(d *jsonrec.Decoder) { d.Str(&back) }); err != nil {
			t.Fatalf("decode %s: %v", want, err)
		}
		json.Unmarshal(want, &stdBack)
		if back != stdBack {
			t.Fatalf("decode %s = %q, encoding/json says %q", want, back, stdBack)
		}
	})
}

func TestFieldsSorted(t *testing.T) {
	got := string(jsonrec.Fields{}.Num("lease_token", 3).Str("expires_at", "2026-11-23T05:00:00.000000Z").JSON())
	if want := `{"expires_at":"2026-11-23T05:00:00.000000Z","lease_token":3}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestMatchPrefersExactThenFold(t *testing.T) {
	names := []string{"Thread", "thread", "id"}
	for _, tc := range []struct {
		got  string
		want int
	}{{"thread", 1}, {"Thread", 0}, {"THREAD", 0}, {"ID", 2}, {"other", -1}, {"ſd", -1}} {
		if got := jsonrec.Match([]byte(tc.got), names); got != tc.want {
			t.Errorf("Match(%q) = %d, want %d", tc.got, got, tc.want)
		}
	}
}

// escapedString is a JSON string with every kind of escape, as a body
// with quotes, tabs, newlines and non-ASCII text encodes.
var escapedString = jsonrec.AppendString(nil, strings.Repeat("line \"one\"\ttab\\ — é \U0001F600\n", 64)+"\x01")

func BenchmarkDecodeEscaped(b *testing.B) {
	b.SetBytes(int64(len(escapedString)))
	b.ReportAllocs()
	for b.Loop() {
		var s string
		if err := jsonrec.Decode(escapedString, func(d *jsonrec.Decoder) { d.Str(&s) }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeOwnedEscaped(b *testing.B) {
	buf := make([]byte, len(escapedString))
	b.SetBytes(int64(len(escapedString)))
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, escapedString)
		var s string
		if err := jsonrec.DecodeOwned(buf, func(d *jsonrec.Decoder) { d.Str(&s) }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendString(b *testing.B) {
	s := strings.Repeat("line \"one\"\ttab\\ — é \U0001F600\n", 64)
	buf := jsonrec.AppendString(nil, s)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = jsonrec.AppendString(buf[:0], s)
	}
}
