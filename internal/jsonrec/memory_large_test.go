package jsonrec_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/inbox-dev/inbox/internal/jsonrec"
	"github.com/inbox-dev/inbox/internal/jsonrec/jsonrectest"
)

// StringLen is exactly what AppendString writes, and DecodeOwned reads
// back what Decode does, for every escaping rule.
func FuzzStringLenAndOwnedDecode(f *testing.F) {
	for _, a := range jsonrectest.Pieces {
		for _, b := range jsonrectest.Pieces {
			f.Add(a + b + a)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := jsonrec.AppendString(nil, s)
		if got := jsonrec.StringLen(s); got != len(enc) {
			t.Fatalf("StringLen(%q) = %d, want %d", s, got, len(enc))
		}
		// Two strings in a row, so that the second is unescaped in place
		// behind the first, which must stay intact.
		rec := append(append(append([]byte("["), enc...), ','), enc...)
		rec = append(rec, ']')
		var want []string
		if err := jsonrec.Decode(rec, func(d *jsonrec.Decoder) { jsonrec.ReadSlice(d, &want, jsonrec.ReadString) }); err != nil {
			t.Fatalf("decode %s: %v", rec, err)
		}
		var got []string
		if err := jsonrec.DecodeOwned(bytes.Clone(rec), func(d *jsonrec.Decoder) { jsonrec.ReadSlice(d, &got, jsonrec.ReadString) }); err != nil {
			t.Fatalf("owned decode %s: %v", rec, err)
		}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("owned decode %s = %q, want %q", rec, got, want)
		}
	})
}

// Raw input the store never writes (invalid UTF-8 right after an escape,
// so that U+FFFD does not fit in place) decodes as Decode decodes it.
func TestDecodeOwnedInvalidUTF8(t *testing.T) {
	for _, in := range []string{"\"\xff\xfe\xfd\"", "\"\\n\xff\xff\xff\xff\"", "\"ab\\u0041\xffcd\xfe\"", "\"\\\\\xff\\\"\xff\""} {
		var want, got string
		errWant := jsonrec.Decode([]byte(in), func(d *jsonrec.Decoder) { d.Str(&want) })
		errGot := jsonrec.DecodeOwned([]byte(in), func(d *jsonrec.Decoder) { d.Str(&got) })
		if (errWant == nil) != (errGot == nil) || got != want {
			t.Errorf("DecodeOwned(%q) = %q, %v; want %q, %v", in, got, errGot, want, errWant)
		}
	}
}

func TestReadMember(t *testing.T) {
	big := strings.Repeat(`x\"\\y\n`, 50000) // escaped quotes and backslashes across buffer boundaries
	for _, tc := range []struct {
		name, in, want string
		err            error
	}{
		{"first", `{"thread_header":{"a":[1,"}"]},"body":"` + big + `"}`, `{"a":[1,"}"]}`, nil},
		{"last", `{"body":"` + big + `","n":-1.5e3,"t":true,"x":null,"o":{"k":["v",{}]},"thread_header":{"s":"\\"}}`, `{"s":"\\"}`, nil},
		{"folded", `{"Thread_Header":{"a":1}}`, `{"a":1}`, nil},
		{"spaced", " {\n \"body\" : \"b\" ,\t\"thread_header\" :\n{ \"a\" : 1 } }", `{"a":1}`, nil},
		{"not first-level", `{"body":{"thread_header":1},"x":2}`, "", jsonrec.ErrNoMember},
		{"empty", `{}`, "", jsonrec.ErrNoMember},
		{"truncated in body", `{"body":"` + big[:1000], "", errAny},
		{"truncated in header", `{"thread_header":{"a":`, "", errAny},
		{"garbage", `{"body": garbage`, "", errAny},
		{"not an object", `["thread_header"]`, "", errAny},
		{"too long", `{"thread_header":"` + big + `"}`, "", errAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []func(string) *strings.Reader{strings.NewReader} {
				got, err := jsonrec.ReadMember(bufio.NewReaderSize(iotest.HalfReader(r(tc.in)), 16), "thread_header", 1<<16)
				switch {
				case tc.err == errAny && err == nil:
					t.Fatalf("got %s, want an error", got)
				case tc.err != errAny && !errors.Is(err, tc.err):
					t.Fatalf("got error %v, want %v", err, tc.err)
				case string(got) != tc.want:
					t.Fatalf("got %s, want %s", got, tc.want)
				}
			}
		})
	}
}

var errAny = errors.New("any error")

func TestDecodePrefix(t *testing.T) {
	var got []string
	n, err := jsonrec.DecodePrefix([]byte(` ["a","b\n"],"rest`), func(d *jsonrec.Decoder) { jsonrec.ReadSlice(d, &got, jsonrec.ReadString) })
	if err != nil || n != 12 || len(got) != 2 || got[1] != "b\n" {
		t.Errorf("DecodePrefix = %d, %v, %q; want 12, nil, [a b\\n]", n, err, got)
	}
	if _, err := jsonrec.DecodePrefix([]byte(`["a","b`), func(d *jsonrec.Decoder) { jsonrec.ReadSlice(d, &got, jsonrec.ReadString) }); err == nil {
		t.Error("a value cut short decoded")
	}
}

// Skip, which skips strings without unescaping them, accepts exactly
// what encoding/json takes for valid JSON.
func FuzzSkip(f *testing.F) {
	for _, s := range jsonrectest.Pieces {
		f.Add([]byte(`{"a":` + string(jsonrec.AppendString(nil, s)) + `,"b":[1,"` + s + `"]}`))
	}
	for _, s := range []string{`"\u00e9\ud83d\ude00"`, `"\u12"`, `"\x"`, `"a`, `"\`, "\"\x01\"", `"\/\b\f\n\r\t\"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := jsonrec.Decode(data, func(d *jsonrec.Decoder) { d.Skip() })
		if valid := json.Valid(data); (err == nil) != valid {
			t.Fatalf("Skip(%q): %v; json.Valid says %v", data, err, valid)
		}
	})
}

// Long strings share the buffer (unescaped in place); they read back as
// Decode reads them, and the strings before them stay intact.
func TestDecodeOwnedLong(t *testing.T) {
	for _, p := range jsonrectest.Pieces {
		long := strings.Repeat(p+"x", 5000)
		enc := jsonrec.AppendString(nil, long)
		rec := []byte(`[` + string(enc) + `,"id",` + string(enc) + `]`)
		var want, got []string
		if err := jsonrec.Decode(rec, func(d *jsonrec.Decoder) { jsonrec.ReadSlice(d, &want, jsonrec.ReadString) }); err != nil {
			t.Fatal(err)
		}
		if err := jsonrec.DecodeOwned(bytes.Clone(rec), func(d *jsonrec.Decoder) { jsonrec.ReadSlice(d, &got, jsonrec.ReadString) }); err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if len(got) != 3 || got[0] != want[0] || got[1] != "id" || got[2] != want[2] {
			t.Fatalf("%q: owned decode differs", p)
		}
	}
}
