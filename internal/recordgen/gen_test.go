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
