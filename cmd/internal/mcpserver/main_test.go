package mcpserver

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/cmd/internal/localhttp/localhttptest"
	"github.com/inbox-dev/inbox/internal/testproc"
)

// TestMain installs this test binary as "inbox" (the CLI with the MCP
// server, as inbox-mcp is) on PATH for the tests that start processes,
// and as "mcp-probe", a client that another user runs (http_test.go).
// The tests and the processes they start keep their temp files in one
// directory removed at the end (testproc.Main).
func TestMain(m *testing.M) {
	testscript.Main(testproc.M(m), map[string]func(){
		"inbox": func() {
			cli.ServeMCP = Serve
			os.Exit(cli.Main())
		},
		"mcp-probe":                 probeMain,
		localhttptest.HolderCommand: localhttptest.HolderMain,
	})
}
