package jsontext_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/internal/jsontext"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		in     string
		offset int // -1: accepted
	}{
		{`{"a":"b"}`, -1},
		{`{"a":"\ud83d\ude00"}`, -1}, // a pair: 😀
		{`{"a":"\uD83D\uDE00"}`, -1},
		{`{"a":"\u00e9\n\\u d800"}`, -1}, // an escaped backslash, then text
		{`{"a":"\\ud800"}`, -1},          // the text \ud800, not an escape
		{`{"a":"\ud800"}`, 6},
		{`{"a":"\udc00"}`, 6},
		{`{"a":"x\ud800\u0041"}`, 7}, // high surrogate, then not a low one
		{`{"a":"\ud800\ud800"}`, 6},
		{`["ok","\ude00"]`, 7},
		{"{\"a\":\"\xff\"}", 6},
		{"{\"a\":\"\xed\xa0\x80\"}", 6}, // a surrogate encoded as UTF-8
		{`{"\ud800":1}`, 2},             // keys too
	} {
		err := jsontext.Check([]byte(tc.in))
		if tc.offset < 0 {
			if err != nil {
				t.Errorf("Check(%s) = %v, want nil", tc.in, err)
			}
			continue
		}
		e, ok := err.(*jsontext.Error)
		if !ok {
			t.Errorf("Check(%s) = %v, want an error at byte %d", tc.in, err, tc.offset)
			continue
		}
		if e.Offset != tc.offset {
			t.Errorf("Check(%s): offset %d, want %d (%v)", tc.in, e.Offset, tc.offset, e)
		}
	}
}

// FuzzCheck holds Check to its promise: what it accepts decodes and
// re-encodes to a value equal to the one decoded (nothing was replaced).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`"\ud800"`, `"\ud83d\ude00"`, `{"a":["\u0000"]}`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		if jsontext.Check(data) != nil {
			return
		}
		// Accepted: every string must survive a round trip unchanged,
		// which fails exactly when decoding substituted U+FFFD.
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var w any
		if err := json.Unmarshal(out, &w); err != nil {
			t.Fatal(err)
		}
		if !equal(v, w) {
			t.Fatalf("%q: not stable through a round trip", data)
		}
		if intended(data) != countReplacement(out) {
			t.Fatalf("%q was accepted, but decoding replaced something with U+FFFD: %s", data, out)
		}
	})
}

func equal(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// intended counts the U+FFFD a JSON text spells out: the character
// itself, or its \u escape.
func intended(data []byte) int {
	n := 0
	in := false
	for i := 0; i < len(data); i++ {
		switch {
		case !in:
			in = data[i] == '"'
		case data[i] == '"':
			in = false
		case data[i] == '\\':
			if i+5 < len(data) && data[i+1] == 'u' && strings.EqualFold(string(data[i+2:i+6]), "fffd") {
				n++
			}
			i++
		case i+2 < len(data) && data[i] == 0xef && data[i+1] == 0xbf && data[i+2] == 0xbd:
			n++
			i += 2
		}
	}
	return n
}

// countReplacement counts U+FFFD in the strings of a JSON text.
func countReplacement(data []byte) int {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return -1
	}
	n := 0
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			for _, r := range x {
				if r == '\uFFFD' {
					n++
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				walk(k)
				walk(e)
			}
		}
	}
	walk(v)
	return n
}
