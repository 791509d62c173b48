package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestMCPNeedsItsBinary: without the inbox-mcp binary beside this one or
// on PATH, inbox mcp says how to build it (exit 40) and starts nothing.
func TestMCPNeedsItsBinary(t *testing.T) {
	_, db := storetest.New(t, spool.Options{})
	empty := t.TempDir()
	Executable = func() (string, error) { return filepath.Join(empty, "inbox"), nil }
	t.Cleanup(func() { Executable = os.Executable })
	t.Setenv("PATH", empty)
	var out, errb bytes.Buffer
	code := run([]string{"mcp", "--db", db, "--json"}, &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: os.Getenv})
	if code != exitNotFound || !strings.Contains(out.String(), `"code":"mcp_not_installed"`) || !strings.Contains(out.String(), "go build -o bin/ ./cmd/...") {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
}
