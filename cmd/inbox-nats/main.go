// Command inbox-nats is the inbox command line with the NATS JetStream
// backend linked in (package natsbus), and the MCP server: the inbox
// binary hands it every command on a nats:// or tls:// store, so that its
// own start stays lean. Given a directory store it does as inbox would.
//
// inbox-nats server runs a NATS server with JetStream configured as those
// stores need it (every write synced before it is acknowledged), for a
// newcomer or a single machine: see inbox-nats server --help. It is the
// inbox-nats-server binary beside this one (cmd/inbox-nats/inbox-nats-server),
// which this one becomes, so that no other command loads the server's code.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/cmd/internal/mcpserver"
	"github.com/inbox-dev/inbox/cmd/internal/webserver"
	"github.com/inbox-dev/inbox/internal/migrate"
	"github.com/inbox-dev/inbox/natsbus"
)

// version is the binary's version, set at build time with
// go build -ldflags "-X main.version=1.2.3"; when empty, inbox reports the
// module version go install recorded, else "dev".
var version string

func main() {
	if len(os.Args) > 1 && os.Args[1] == "server" {
		os.Exit(handOverServer(os.Args[2:]))
	}
	if len(os.Args) == 3 && os.Args[1] == "help" && os.Args[2] == "server" {
		os.Exit(handOverServer([]string{"--help"}))
	}
	cli.SetVersion(version)
	cli.HideSecrets()
	cli.ServeMCP = mcpserver.Serve
	cli.ServeWeb = webserver.Serve
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

// serverBinary runs inbox-nats server.
const serverBinary = "inbox-nats-server"

// handOverServer replaces this process with inbox-nats-server (beside
// this binary, else on PATH) given args; it returns only when it cannot.
func handOverServer(args []string) int {
	bin := ""
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), serverBinary); isExecutable(p) {
			bin = p
		}
	}
	if bin == "" {
		if p, err := exec.LookPath(serverBinary); err == nil {
			bin = p
		}
	}
	if bin == "" {
		fmt.Fprintf(os.Stderr, "inbox-nats: error: inbox-nats server is the %s binary, found neither beside this one nor on PATH: build them all with go build -o bin/ ./cmd/... (or go install ./cmd/...)\n", serverBinary)
		return 40
	}
	err := syscall.Exec(bin, append([]string{serverBinary}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "inbox-nats: error: run %s: %v\n", bin, err)
	return 50
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
