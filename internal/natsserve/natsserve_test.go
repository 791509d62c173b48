package natsserve_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/internal/natsserve"
)

// TestStart checks the server's configuration as it runs: JetStream syncs
// every write (sync_interval: always), it listens where it was told, and
// the store directory is its alone.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	s, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if !s.SyncAlways() {
		t.Error("the server's JetStream does not sync every write")
	}
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") || strings.HasSuffix(s.URL(), ":0") {
		t.Errorf("URL %s, want nats://127.0.0.1:PORT with the port it listens on", s.URL())
	}
	if s.StoreDir() != dir {
		t.Errorf("StoreDir %s, want %s", s.StoreDir(), dir)
	}

	// A second server on the same store directory is refused.
	if _, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: dir}); !errors.Is(err, natsserve.ErrLocked) {
		t.Errorf("a second server on the store directory: %v, want ErrLocked", err)
	}

	// An address in use makes Start fail, and leaves the directory free.
	other := t.TempDir()
	taken := strings.TrimPrefix(s.URL(), "nats://")
	if _, err := natsserve.Start(natsserve.Config{Listen: taken, StoreDir: other}); err == nil {
		t.Errorf("a server on %s, which another listens on, started", taken)
	}
	s2, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: other})
	if err != nil {
		t.Fatalf("a server on the store directory a failed start used: %v", err)
	}
	s2.Stop()
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		listen, host string
		port         int
		bad          bool
	}{
		{listen: natsserve.DefaultListen, host: "127.0.0.1", port: 4222},
		{listen: "127.0.0.1:0", host: "127.0.0.1", port: -1},
		{listen: ":4222", host: "0.0.0.0", port: 4222},
		{listen: "[::1]:5000", host: "::1", port: 5000},
		{listen: "127.0.0.1", bad: true},
		{listen: "127.0.0.1:http", bad: true},
		{listen: "127.0.0.1:70000", bad: true},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			o, err := natsserve.Options(natsserve.Config{Listen: tc.listen, StoreDir: "d"})
			if tc.bad {
				if err == nil {
					t.Fatalf("got options for %q, want an error", tc.listen)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Host != tc.host || o.Port != tc.port || !o.JetStream || !o.SyncAlways || !o.NoSigs {
				t.Errorf("got host %s port %d jetstream %v sync always %v no sigs %v, want %s %d true true true", o.Host, o.Port, o.JetStream, o.SyncAlways, o.NoSigs, tc.host, tc.port)
			}
			if net.ParseIP(o.Host) == nil {
				t.Errorf("host %q is not an address", o.Host)
			}
		})
	}
	if _, err := natsserve.Options(natsserve.Config{Listen: natsserve.DefaultListen}); err == nil {
		t.Error("got options without a store directory, want an error")
	}
}
