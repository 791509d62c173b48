// A CLI call lives for a few milliseconds: skip the runtime's cgroup probe
// for GOMAXPROCS (five file reads at every start) and its periodic refresh.

//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0

// Command inbox is a durable coordination bus for AI agents on one machine:
// threads, messages, leases and a monotonic event log in a directory tree.
// See README.md and `inbox help`.
package main

import (
	"os"

	// One processor from start-up: see package procs.
	_ "github.com/inbox-dev/inbox/cmd/inbox/internal/procs"
)

func main() {
	os.Exit(run(os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}
