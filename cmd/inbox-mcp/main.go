// Command inbox-mcp is the inbox command line with `inbox mcp` served in
// process: the Model Context Protocol server (cmd/internal/mcpserver),
// which links the MCP SDK. The inbox binary runs it for `inbox mcp`, so
// that its own start stays lean; anything else it is given it does as
// inbox would.
package main

import (
	"os"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/cmd/internal/mcpserver"
)

// version is the binary's version, set at build time with
// go build -ldflags "-X main.version=1.2.3"; when empty, inbox reports the
// module version go install recorded, else "dev".
var version string

func main() {
	cli.SetVersion(version)
	cli.ServeMCP = mcpserver.Serve
	os.Exit(cli.Main())
}
