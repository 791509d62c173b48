// Command inbox-web is the inbox command line with `inbox web` served in
// process: the live dashboard (cmd/internal/webserver) with its embedded
// page. The inbox binary runs it for `inbox web`, so that its own start
// stays lean; anything else it is given it does as inbox would.
package main

import (
	"os"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/cmd/internal/webserver"
)

// version is the binary's version, set at build time with
// go build -ldflags "-X main.version=1.2.3"; when empty, inbox reports the
// module version go install recorded, else "dev".
var version string

func main() {
	cli.SetVersion(version)
	cli.ServeWeb = webserver.Serve
	os.Exit(cli.Main())
}
