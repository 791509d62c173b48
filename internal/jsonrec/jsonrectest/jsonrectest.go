// Package jsonrectest holds the generated record codecs to encoding/json:
// a package calls Check for each of its record types in a test, and
// Decode with arbitrary input in a fuzz target.
package jsonrectest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// Marshal is encoding/json with HTML escaping off, as the store writes.
func Marshal(tb testing.TB, v any) []byte {
	tb.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		tb.Fatalf("encoding/json: %v", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Pieces are the bits random strings are made of: every escaping rule of
// JSON and of encoding/json (HTML characters, U+2028, invalid UTF-8).
var Pieces = []string{"", "a", "thread", " ", "\"", "\\", "/", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
	"<", ">", "&", "é", "日本", "\u2028", "\u2029", "\U0001F600", "\xff", "\xe2\x80", "\xed\xa0\x80", "\\u0041", "null"}

var raws = []string{`{}`, `[]`, `null`, `1`, `-0.5e+3`, `"s"`, `{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`,
	`{ "spaced" : [ 1 , 2 ] }`, `true`, `[{"x":"\u2028"}]`}

var rawType = reflect.TypeFor[json.RawMessage]()

// Random fills a value of v's type with random content: strings from
// Pieces, integers of every size, raw JSON, and pointers, slices and maps
// that are sometimes nil, sometimes empty, nested up to depth.
func Random(r *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.String:
		var b strings.Builder
		if r.IntN(4) > 0 {
			for range r.IntN(6) {
				b.WriteString(Pieces[r.IntN(len(Pieces))])
			}
		}
		v.SetString(b.String())
	case reflect.Int, reflect.Int64:
		switch r.IntN(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(-r.Int64())
		default:
			v.SetInt(r.Int64N(1 << (r.IntN(62) + 1)))
		}
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Slice:
		if v.Type() == rawType {
			if r.IntN(5) > 0 {
				v.SetBytes([]byte(raws[r.IntN(len(raws))]))
			}
			return
		}
		if depth <= 0 || r.IntN(4) == 0 {
			return // nil
		}
		n := r.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			Random(r, s.Index(i), depth-1)
		}
		v.Set(s)
	case reflect.Map:
		if depth <= 0 || r.IntN(3) == 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range r.IntN(4) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			Random(r, k, depth-1)
			Random(r, e, depth-1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		if depth <= 0 || r.IntN(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		Random(r, p.Elem(), depth-1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				Random(r, v.Field(i), depth)
			}
		}
	}
}

// Check holds T's generated codec to encoding/json: 2,000 random values
// must encode byte for byte as encoding/json encodes them, and decode
// back (with decode) to what json.Unmarshal makes of them; so must the
// inputs of Corpus decode, errors included.
func Check[T any](t *testing.T, appendJSON func(*T, []byte) []byte, decode func(*T, []byte) error) {
	t.Helper()
	name := reflect.TypeFor[T]().String()
	r := rand.New(rand.NewPCG(7, uint64(len(name))))
	for range 2000 {
		var v T
		Random(r, reflect.ValueOf(&v).Elem(), 3)
		got := appendJSON(&v, nil)
		if want := Marshal(t, &v); !bytes.Equal(got, want) {
			t.Fatalf("%s: encoding\n got %s\nwant %s", name, got, want)
		}
		Decode(t, got, decode)
	}
	for _, s := range Corpus {
		Decode(t, []byte(s), decode)
	}
}

// Decode decodes data with decode and with json.Unmarshal into fresh
// values of T and fails on any disagreement: one erring and not the
// other, or different values.
func Decode[T any](t *testing.T, data []byte, decode func(*T, []byte) error) {
	t.Helper()
	var got, want T
	merr, serr := decode(&got, data), json.Unmarshal(data, &want)
	if (merr == nil) != (serr == nil) {
		t.Fatalf("%T: %q: codec error %v, encoding/json error %v", got, data, merr, serr)
	}
	if merr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%T: %q:\n codec %#v\n  json %#v", got, data, got, want)
	}
}

// Corpus holds inputs where encoding/json's rules are easy to get wrong;
// it also seeds the fuzz targets.
var Corpus = []string{
	``, ` `, `null`, ` null `, `{}`, `[]`, `"x"`, `1`, `{"thread_id":"a"}x`, `{"thread_id":"a",}`, `{,}`,
	`{"thread_id":null}`, `{"message_count":null}`, `{"message_count":1.0}`, `{"message_count":1e2}`,
	`{"message_count":-0}`, `{"message_count":01}`, `{"message_count":9223372036854775808}`,
	`{"message_count":-9223372036854775808}`, `{"message_count":"1"}`, `{"subject":1}`, `{"subject":true}`,
	`{"THREAD_ID":"a","thread_id":"b"}`, `{"thread_id":"b","Thread_Id":"a"}`, `{"ſubject":"long s"}`,
	`{"last_event_\u0069d":7}`, `{"subject":"\ud83d\ude00 \ud83d x \udc00\u0041 \"\\\/\b\f\n\r\t"}`,
	`{"subject":"\'"}`, `{"subject":"` + "\x01" + `"}`, `{"subject":"` + "\xff\xfe" + `"}`, "{\"s\xffbject\":1}",
	`{"lease":null}`, `{"lease":{"agent_id":"a"},"lease":{"lease_token":3}}`, `{"lease":[]}`, `{"lease":"x"}`,
	`{"last_from":{"a":1,"b":null}}`, `{"last_from":{"a":1},"last_from":{"b":2}}`, `{"last_from":null}`,
	`{"last_from":{"a":"x"}}`, `{"log_pos":{"segment":1},"log_pos":{"offset":2}}`, `{"log_pos":null}`,
	`{"last_event":{"state":{"last_event":{"event_id":3}}}}`, `{"payload_json":null}`, `{"payload_json": { "a" : 1 } }`,
	`{"artifacts":[]}`, `{"artifacts":null}`, `{"artifacts":[null,{"path":"p"}]}`, `{"artifacts":{}}`,
	`{"artifacts":[{"path":"a"},{"path":"b"},{"path":"c"}],"artifacts":[{"kind":"k"}],"artifacts":[{},{}]}`,
	`{"unknown":[1,{"x":[true,false,null]}],"subject":"s"}`, `{"unknown":tru}`, `{"unknown":-}`, `{"unknown":1.}`,
	`{"unknown":.5}`, `{"unknown":1e}`, `{"unknown":"\u12G4"}`, `{"format":"inbox-store","version":1}`,
	`{"format":"inbox-store","version":null,"shared":true}`, `{"shared":"yes"}`, `{"shared":null}`,
	`{"released_at":null,"rev":2}`, `{"released_at":"t"}`, `{"released_at":7}`, `{"recipients":["a",null,"b"]}`,
	`{"recipients":"a"}`, "\t{\"subject\" :\r\n\"x\"}\n", `{"a":1}{"b":2}`, `{"subject":"x"`,
	strings.Repeat(`{"u":`, 10001) + `1` + strings.Repeat(`}`, 10001),
	strings.Repeat(`{"u":`, 10000) + `1` + strings.Repeat(`}`, 10000),
	strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001),
}
