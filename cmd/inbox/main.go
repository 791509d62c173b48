// Command inbox is a durable coordination bus for AI agents on one machine:
// threads, messages, leases and a monotonic event log in a directory tree.
// See README.md and `inbox help`. The commands live in cmd/internal/cli;
// `inbox mcp` runs the inbox-mcp binary beside this one, which links the
// MCP SDK so that this one starts lean.
package main

import (
	"os"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
)

func main() { os.Exit(cli.Main()) }
