// Command inbox is a durable coordination bus for AI agents on one machine:
// threads, messages, leases and a monotonic event log in a directory tree.
// See README.md and `inbox help`.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}
