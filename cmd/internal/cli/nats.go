package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/inbox-dev/inbox"
)

// NATS stores (docs/JETSTREAM.md). The inbox binary does not link the
// NATS client, whose package initialisation every process would pay: given
// a nats:// (or tls://) store it hands the whole command line to the
// inbox-nats binary, which is this CLI with OpenNATS set.

// OpenNATS opens (create: or creates) the NATS store db names, when this
// binary links the NATS backend; source is what its events record.
var OpenNATS func(db string, create bool, source string) (bus inbox.Bus, created bool, err error)

// natsBinary is the companion binary that serves NATS stores.
const natsBinary = "inbox-nats"

// isNATS reports whether db names a NATS store rather than a directory.
func isNATS(db string) bool {
	return strings.HasPrefix(db, "nats://") || strings.HasPrefix(db, "tls://")
}

// storeless are the commands that never open a store.
var storeless = map[string]bool{"completion": true, "skill": true}

// handOver replaces this process with inbox-nats (beside this binary,
// else on PATH) given the same arguments, so that stdin, stdout, stderr,
// signals and the exit code are the companion's own.
func handOver(c *call) error {
	bin := ""
	if self, err := Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), natsBinary); isExecutable(p) {
			bin = p
		}
	}
	if bin == "" {
		if p, err := exec.LookPath(natsBinary); err == nil {
			bin = p
		}
	}
	if bin == "" {
		return inbox.Errorf(inbox.ErrNotFound, "nats_not_installed", "db",
			"a nats:// store is served by the %s binary, found neither beside this one nor on PATH: build both with go build -o bin/ ./cmd/... (or go install ./cmd/...)", natsBinary)
	}
	err := syscall.Exec(bin, append([]string{natsBinary}, c.raw...), os.Environ())
	return inbox.Internal(fmt.Errorf("run %s: %w", bin, err))
}
