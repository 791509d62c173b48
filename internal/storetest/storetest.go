// Package storetest sets up what the tests of several packages need: a
// fresh directory store, and descriptors dropped into an intake
// directory the way droppers should drop them. Only tests import it.
package storetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/inbox-dev/inbox/spool"
)

// New initializes a store in a fresh directory under tb.TempDir() and
// opens it with opts, failing tb if either step fails. It returns the
// open store and its path.
func New(tb testing.TB, opts spool.Options) (*spool.Store, string) {
	tb.Helper()
	db := filepath.Join(tb.TempDir(), "store")
	if _, err := spool.Init(db, false); err != nil {
		tb.Fatal(err)
	}
	s, err := spool.Open(tb.Context(), db, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return s, db
}

// Drop writes a descriptor into the intake directory dir the way
// droppers should: a temp file, then a rename to name.
func Drop(tb testing.TB, dir, name, body string) {
	tb.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		tb.Fatal(err)
	}
}
