package mcpserver

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestMCPTypeScriptClient drives the inbox binary's MCP server with a
// client nobody here wrote: the official TypeScript SDK, installed from npm
// at the version testdata/mcp-client/package-lock.json pins. The script
// lists the tools, runs a worker's loop with a chunked wait (a first
// chunk that times out with progress, a second woken by a reply), and
// checks an error.
func TestMCPTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to run the TypeScript MCP client: %v", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is needed to install the TypeScript MCP client: %v", err)
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "client.mjs"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "mcp-client", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	s, db := storetest.New(t, spool.Options{})
	client := exec.Command(node, "client.mjs", lookInbox(t, "inbox"), db)
	client.Dir = dir
	var stderr strings.Builder
	client.Stderr = &stderr
	out, err := client.Output()
	if err != nil {
		t.Fatalf("the TypeScript client: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var got struct {
		OK       bool   `json:"ok"`
		Tools    int    `json:"tools"`
		Thread   string `json:"thread"`
		Progress int    `json:"progress"`
	}
	if err := json.Unmarshal(out, &got); err != nil || !got.OK || got.Progress < 1 {
		t.Fatalf("client result %s (%v)\nstderr: %s", out, err, stderr.String())
	}
	// The loop the client ran is in the store, as the CLI sees it.
	th, err := s.Thread(got.Thread)
	if err != nil || th.Status != "done" || th.MessageCount != 4 {
		t.Fatalf("thread after the client's loop: %+v %v", th, err)
	}
	t.Logf("TypeScript client: %d tools, %d progress notifications", got.Tools, got.Progress)
}
