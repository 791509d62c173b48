package jsonedit_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/inbox-dev/inbox/internal/jsonedit"
)

func parse(t *testing.T, src string) *jsonedit.Doc {
	t.Helper()
	d, err := jsonedit.Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return d
}

// check compares the edited text with want, and checks that it is JSON.
func check(t *testing.T, d *jsonedit.Doc, want string) {
	t.Helper()
	got := string(d.Bytes())
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Errorf("the result is not valid JSON:\n%s", got)
	}
}

// at returns the node of d reached from its root through the keys of
// path.
func at(d *jsonedit.Doc, path []string) *jsonedit.Node {
	c := d.Root
	for _, k := range path {
		c = c.Get(k)
	}
	return c
}

func TestParseSpans(t *testing.T) {
	src := "{\"a\": [1, \"x\\\"y\", {\"b\": null}],\n \"c\\u0064\": true}"
	d := parse(t, src)
	r := d.Root
	if r.Kind != jsonedit.Object || r.Start != 0 || r.End != len(src) || r.Len() != 2 {
		t.Fatalf("got root %+v, want an object over the whole text with 2 members", r)
	}
	a := r.Get("a")
	if a == nil || a.Kind != jsonedit.Array || a.Len() != 3 {
		t.Fatalf("got a = %+v, want an array of 3", a)
	}
	for i, want := range []string{`1`, `"x\"y"`, `{"b": null}`} {
		if got := string(d.Raw(a.Elems[i])); got != want {
			t.Errorf("element %d: got %s, want %s", i, got, want)
		}
	}
	if got := a.Elems[2].Get("b"); got == nil || string(d.Raw(got)) != "null" {
		t.Errorf("got a[2].b = %v, want null", got)
	}
	// Keys are decoded; KeyStart is the key's opening quote.
	if r.Members[1].Key != "cd" || src[r.Members[1].KeyStart] != '"' {
		t.Errorf("got key %q at %d, want \"cd\" at a quote", r.Members[1].Key, r.Members[1].KeyStart)
	}
	if r.Get("missing") != nil || a.Get("a") != nil {
		t.Error("Get found a member that is not there")
	}
}

func TestParseScalarRoot(t *testing.T) {
	d := parse(t, " 42 ")
	if d.Root.Kind != jsonedit.Scalar || string(d.Raw(d.Root)) != "42" {
		t.Errorf("got %+v (%s), want the scalar 42", d.Root, d.Raw(d.Root))
	}
}

func TestParseInvalid(t *testing.T) {
	for _, src := range []string{
		``,
		`{`,
		`{"a": 1,}`,
		`[1, 2`,
		"{\n  // a comment\n  \"a\": 1\n}",
		"{\"a\": 1 /* a comment */}",
		`{'a': 1}`,
		`{"a": 1} {"b": 2}`,
		`nul`,
	} {
		if _, err := jsonedit.Parse([]byte(src)); !errors.Is(err, jsonedit.ErrInvalid) {
			t.Errorf("Parse(%q): got %v, want ErrInvalid", src, err)
		}
	}
}

func TestIndentUnit(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"{}", "  "},
		{"{\"a\": 1}", "  "},
		{"{\n    \"a\": 1\n}", "    "},
		{"{\n\t\"a\": 1\n}", "\t"},
	} {
		if got := parse(t, tc.src).Unit; got != tc.want {
			t.Errorf("Unit of %q: got %q, want %q", tc.src, got, tc.want)
		}
	}
}

func TestAppend(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		path      []string // members to follow from the root
		items     []string
		want      string
	}{
		{"empty object", `{}`, nil, []string{`"a": 1`}, "{\n  \"a\": 1\n}"},
		// The unit is the first indented line's indentation, here " }"'s.
		{"empty object with space", "{ \n }", nil, []string{`"a": 1`}, "{\n \"a\": 1\n}"},
		{"after the last member", "{\n  \"a\": 1\n}", nil, []string{`"b": 2`}, "{\n  \"a\": 1,\n  \"b\": 2\n}"},
		{"several as one splice", "{\n  \"a\": 1\n}", nil, []string{`"b": 2`, `"c": 3`}, "{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3\n}"},
		{"nested array, tabs", "{\n\t\"h\": [\n\t\t1\n\t]\n}", []string{"h"}, []string{`2`}, "{\n\t\"h\": [\n\t\t1,\n\t\t2\n\t]\n}"},
		{"nested empty array", "{\n    \"h\": []\n}", []string{"h"}, []string{"{\n    \"x\": 1\n}"}, "{\n    \"h\": [\n        {\n            \"x\": 1\n        }\n    ]\n}"},
		{"one-line object", `{"a":1}`, nil, []string{`"b": 2`}, "{\"a\":1,\n  \"b\": 2}"},
		{"nothing", `{"a":1}`, nil, nil, `{"a":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := parse(t, tc.src)
			d.Append(at(d, tc.path), tc.items...)
			check(t, d, tc.want)
		})
	}
}

func TestRemove(t *testing.T) {
	src := "{\n  \"a\": 1,\n  \"b\": [10, 20, 30, 40],\n  \"c\": 3\n}"
	for _, tc := range []struct {
		name string
		path []string
		idxs []int
		want string
	}{
		{"first member", nil, []int{0}, "{\n  \"b\": [10, 20, 30, 40],\n  \"c\": 3\n}"},
		{"middle member", nil, []int{1}, "{\n  \"a\": 1,\n  \"c\": 3\n}"},
		{"last member", nil, []int{2}, "{\n  \"a\": 1,\n  \"b\": [10, 20, 30, 40]\n}"},
		{"every member", nil, []int{0, 1, 2}, "{}"},
		{"first elements", []string{"b"}, []int{0, 1}, "{\n  \"a\": 1,\n  \"b\": [30, 40],\n  \"c\": 3\n}"},
		{"apart", []string{"b"}, []int{0, 2}, "{\n  \"a\": 1,\n  \"b\": [20, 40],\n  \"c\": 3\n}"},
		{"last elements", []string{"b"}, []int{2, 3}, "{\n  \"a\": 1,\n  \"b\": [10, 20],\n  \"c\": 3\n}"},
		{"every element", []string{"b"}, []int{0, 1, 2, 3}, "{\n  \"a\": 1,\n  \"b\": [],\n  \"c\": 3\n}"},
		{"nothing", []string{"b"}, nil, src},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := parse(t, src)
			d.Remove(at(d, tc.path), tc.idxs...)
			check(t, d, tc.want)
		})
	}
}

func TestReplace(t *testing.T) {
	d := parse(t, "{\n  \"a\": [1,2],   \"b\":\"x\"\n}")
	d.Replace(d.Root.Get("a"), `"whole"`)
	d.Replace(d.Root.Get("b"), "{\"y\": true}")
	check(t, d, "{\n  \"a\": \"whole\",   \"b\":{\"y\": true}\n}")
}

// TestUntouchedBytes checks that edits in one place leave every other
// byte of an oddly formatted file as it was, and that the Doc keeps
// describing the original text.
func TestUntouchedBytes(t *testing.T) {
	src := "\ufeff" + `{ "z"  :  1.50e+2 ,"esc":"\u00e9\/",
	"hooks"   : {"Stop":[ {"x":true} ]},
  "tail": [ ]   }` + "\n\n"
	// A BOM is not JSON: files are given without it.
	if _, err := jsonedit.Parse([]byte(src)); !errors.Is(err, jsonedit.ErrInvalid) {
		t.Fatalf("got %v for a BOM, want ErrInvalid", err)
	}
	src = src[len("\ufeff"):]
	d := parse(t, src)
	d.Append(d.Root.Get("hooks").Get("Stop"), `{"y":false}`)
	want := `{ "z"  :  1.50e+2 ,"esc":"\u00e9\/",
	"hooks"   : {"Stop":[ {"x":true},
		{"y":false} ]},
  "tail": [ ]   }` + "\n\n"
	check(t, d, want)
	if got := string(d.Raw(d.Root.Get("z"))); got != "1.50e+2" {
		t.Errorf("got z = %s after the edit, want the original 1.50e+2", got)
	}
}
