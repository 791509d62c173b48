package spool_test

import (
	"path/filepath"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/bustest"
	"github.com/inbox-dev/inbox/spool"
)

// TestConformance runs the backend conformance suite on a directory store.
func TestConformance(t *testing.T) {
	bustest.Run(t, func(t *testing.T) inbox.Bus {
		db := filepath.Join(t.TempDir(), "store")
		if _, err := spool.Init(db, false); err != nil {
			t.Fatal(err)
		}
		s, err := spool.Open(db, spool.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
