package spool

import (
	"path/filepath"
	"testing"
)

// Helpers the store's white-box tests share.

// initTemp makes a fresh store in a temporary directory and returns its
// path.
func initTemp(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "store")
	if _, err := Init(db, false); err != nil {
		t.Fatal(err)
	}
	return db
}

// openTest opens the store at db with the default options.
func openTest(t *testing.T, db string) *Store {
	t.Helper()
	s, err := Open(t.Context(), db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// openTemp makes a fresh store and opens it, returning it and its path.
func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	db := initTemp(t)
	return openTest(t, db), db
}
