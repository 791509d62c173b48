// Command inbox-nats is the inbox command line with the NATS JetStream
// backend linked in (package natsbus), and the MCP server: the inbox
// binary hands it every command on a nats:// or tls:// store, so that its
// own start stays lean. Given a directory store it does as inbox would.
package main

import (
	"context"
	"os"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/cmd/internal/mcpserver"
	"github.com/inbox-dev/inbox/internal/migrate"
	"github.com/inbox-dev/inbox/natsbus"
)

// version is the binary's version, set at build time with
// go build -ldflags "-X main.version=1.2.3"; when empty, inbox reports the
// module version go install recorded, else "dev".
var version string

func main() {
	cli.SetVersion(version)
	cli.HideSecrets()
	cli.ServeMCP = mcpserver.Serve
	cli.MigrateToNATS = migrate.ToNATS
	cli.MigrateFromNATS = migrate.ToDir
	cli.OpenNATS = func(ctx context.Context, db string, create bool, source string) (inbox.Bus, bool, error) {
		b, err := natsbus.Open(ctx, db, natsbus.Options{Create: create, Source: source})
		if err != nil {
			return nil, false, err
		}
		return b, b.Created(), nil
	}
	os.Exit(cli.Main())
}
