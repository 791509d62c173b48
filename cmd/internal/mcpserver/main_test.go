package mcpserver

import (
	"os"
	"os/exec"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
)

// TestMain installs this test binary as "inbox" (the CLI with the MCP
// server, as inbox-mcp is) on PATH for the tests that start processes,
// and as "mcp-probe", a client that another user runs (http_test.go).
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"inbox": func() {
			cli.ServeMCP = Serve
			os.Exit(cli.Main())
		},
		"mcp-probe": probeMain,
	})
}

func lookInbox(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s is not on PATH (testscript.Main installs it): %v", name, err)
	}
	return p
}
