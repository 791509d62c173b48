package natsbus_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/bustest"
	"github.com/inbox-dev/inbox/internal/natstest"
	"github.com/inbox-dev/inbox/natsbus"
)

func TestConformance(t *testing.T) {
	srv := natstest.Start(t)
	var n atomic.Int64
	bustest.Run(t, func(t *testing.T) inbox.Bus {
		b, err := natsbus.Open(natstest.Store(srv, fmt.Sprint("conf", n.Add(1))), natsbus.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	})
}
