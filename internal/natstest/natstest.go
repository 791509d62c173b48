// Package natstest starts NATS servers with JetStream for tests: in the
// test's own process, on a loopback port chosen by the system, storing in
// the test's temp directory and syncing every write (sync_interval:
// always, as docs/JETSTREAM.md asks of a real deployment). Nothing has to
// be installed.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs a JetStream server until the test ends and returns it.
func Start(t testing.TB) *server.Server {
	t.Helper()
	return StartWith(t, Options(t.TempDir()))
}

// StartAuth runs a JetStream server that lets in only user with password.
func StartAuth(t testing.TB, user, password string) *server.Server {
	t.Helper()
	o := Options(t.TempDir())
	o.Username, o.Password = user, password
	return StartWith(t, o)
}

// StartWith runs a JetStream server with opts until the test ends and
// returns it.
func StartWith(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("the NATS server did not start within 10 s")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Options are a test server's: loopback, a free port, JetStream in dir,
// every write synced, no logging and no signal handlers.
func Options(dir string) *server.Options {
	return &server.Options{
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: true,
		NoLog:      true,
		NoSigs:     true,
	}
}

// Store is the inbox store URL of a new store called name on s.
func Store(s *server.Server, name string) string {
	return s.ClientURL() + "/" + name
}
