package webserver

import (
	"context"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/cmd/internal/localhttp/localhttptest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/natsbus"
)

// TestMain installs this test binary as "inbox" on PATH for the tests
// that start processes: the CLI with the dashboard served in process (as
// inbox-web is) and nats:// stores opened in process (as inbox-nats
// does), so one binary serves both backends; "other-server" (the page of
// another local user, leak_test.go), the connection holders
// (localhttptest) and a fake "xdg-open" (open_test.go).
func TestMain(m *testing.M) {
	testscript.Main(testproc.M(m), map[string]func(){
		"inbox": func() {
			cli.ServeWeb = Serve
			cli.OpenNATS = func(ctx context.Context, db string, create bool, source string) (inbox.Bus, bool, error) {
				b, err := natsbus.Open(ctx, db, natsbus.Options{Create: create, Source: source})
				if err != nil {
					return nil, false, err
				}
				return b, b.Created(), nil
			}
			os.Exit(cli.Main())
		},
		"other-server":              otherServerMain,
		"xdg-open":                  fakeOpenerMain,
		localhttptest.HolderCommand: localhttptest.HolderMain,
	})
}
