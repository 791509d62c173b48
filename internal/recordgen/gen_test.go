package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedRecordsAreCurrent runs every "go:generate … recordgen"
// line of the module and fails when a checked-in file differs from what
// it would write: edit a record type, then run go generate ./...
func TestGeneratedRecordsAreCurrent(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, _, err := findModule(wd)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n") {
			out, args, ok := directive(line)
			if !ok {
				continue
			}
			found++
			dir := filepath.Dir(p)
			want, err := Generate(dir, out, args)
			if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			have, err := os.ReadFile(filepath.Join(dir, out))
			if err != nil || !bytes.Equal(have, want) {
				t.Errorf("%s is stale: run go generate in %s", filepath.Join(dir, out), dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 2 {
		t.Errorf("found %d recordgen directives; expected the root package's and spool's", found)
	}
}

// An embedded record is written and read by its own members' functions
// only when every one of its members stands in the outer record: a
// member the outer record shadows makes the generator write the others
// one by one, as encoding/json promotes them.
func TestEmbeddedRecordDelegatesOnlyWhenWhole(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n",
		"rec.go": "package m\n\ntype inner struct {\n\tA string `json:\"a\"`\n\tB int `json:\"b\"`\n}\n\n" +
			"type whole struct {\n\tinner\n\tC bool `json:\"c\"`\n}\n\n" +
			"type shadowed struct {\n\tinner\n\tB string `json:\"b\"`\n}\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := Generate(dir, "records_gen.go", []string{"whole", "shadowed"})
	if err != nil {
		t.Fatal(err)
	}
	body := func(fn string) string {
		s := string(src)
		i := strings.Index(s, fn)
		if i < 0 {
			t.Fatalf("no %s in\n%s", fn, src)
		}
		s = s[i:]
		return s[:strings.Index(s, "\n}\n")]
	}
	if got := body("func (v *whole) appendJSONMembers"); !strings.Contains(got, "v.inner.appendJSONMembers(b)") {
		t.Errorf("whole does not write its embedded record with the record's own function:\n%s", got)
	}
	if got := body("func (v *whole) readJSONMember"); !strings.Contains(got, "v.inner.readJSONMember(d, i)") {
		t.Errorf("whole does not read its embedded record with the record's own function:\n%s", got)
	}
	got := body("func (v *shadowed) appendJSONMembers")
	if strings.Contains(got, "v.inner.") || !strings.Contains(got, "v.A)") || !strings.Contains(got, "v.B)") {
		t.Errorf("shadowed does not write a and its own b one by one:\n%s", got)
	}
}
