package testproc

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// PlantKinds are the kinds of file Plant makes in place of a store file:
// what inbox must refuse to follow, read or write through.
var PlantKinds = []string{"symlink", "fifo", "socket"}

// Plant makes a file of kind (one of PlantKinds) at p: a symbolic link to
// victim, a FIFO, or a unix socket, which stays bound until tb ends.
func Plant(tb testing.TB, kind, p, victim string) {
	tb.Helper()
	switch kind {
	case "symlink":
		if err := os.Symlink(victim, p); err != nil {
			tb.Fatal(err)
		}
	case "fifo":
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			tb.Fatal(err)
		}
	case "socket":
		// Bound under a short name (a socket's path is limited to 108
		// bytes), then moved into place.
		dir, err := os.MkdirTemp("", "sock")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { os.RemoveAll(dir) })
		l, err := net.Listen("unix", filepath.Join(dir, "s"))
		if err != nil {
			tb.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		tb.Cleanup(func() { l.Close() })
		if err := os.Rename(filepath.Join(dir, "s"), p); err != nil {
			tb.Fatal(err)
		}
	default:
		tb.Fatalf("testproc.Plant: unknown kind %q", kind)
	}
}
