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

// version is the binary's version, set at build time with
// go build -ldflags "-X main.version=1.2.3"; when empty, inbox reports the
// module version go install recorded, else "dev".
var version string

func main() {
	cli.SetVersion(version)
	os.Exit(cli.Main())
}
