package spool_test

import (
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/bustest"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestConformance runs the backend conformance suite on a directory store.
func TestConformance(t *testing.T) {
	bustest.Run(t, func(t *testing.T) inbox.Bus {
		s, _ := storetest.New(t, spool.Options{})
		return s
	})
}
