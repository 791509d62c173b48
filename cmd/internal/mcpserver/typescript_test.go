package mcpserver

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// TestMCPTypeScriptClient drives the inbox binary's MCP server with a
// client nobody here wrote: the official TypeScript SDK, installed from npm
// at the version testdata/mcp-client/package-lock.json pins. Over stdio,
// the script lists the tools (each with an output schema and hints),
// runs a worker's loop with a chunked wait (a first chunk that times out
// with progress, a second woken by a reply), and checks an error; over
// HTTP, it is refused without the token and runs a task with it. The
// client validates every result, errors too, against its tool's output
// schema, and fails the call when one does not match.
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
	if err := os.WriteFile(filepath.Join(dir, "http_client.mjs"), []byte(httpClientJS), 0o600); err != nil {
		t.Fatal(err)
	}
	install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	t.Run("stdio", func(t *testing.T) {
		s, db := storetest.New(t, spool.Options{})
		client := exec.Command(node, "client.mjs", testproc.Installed(t, "inbox"), db)
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
		th, err := s.Thread(t.Context(), got.Thread)
		if err != nil || th.Status != "done" || th.MessageCount != 4 {
			t.Fatalf("thread after the client's loop: %+v %v", th, err)
		}
		t.Logf("TypeScript client: %d tools, %d progress notifications", got.Tools, got.Progress)
	})
	t.Run("http", func(t *testing.T) {
		_, db := storetest.New(t, spool.Options{})
		s := startHTTP(t, db)
		client := exec.Command(node, "http_client.mjs", s.url, s.tokenFile)
		client.Dir = dir
		var stderr strings.Builder
		client.Stderr = &stderr
		out, err := client.Output()
		if err != nil || !strings.Contains(string(out), `"ok":true`) {
			t.Fatalf("the TypeScript HTTP client: %v\nstdout: %s\nstderr: %s\nserver:\n%s", err, out, stderr.String(), s.log())
		}
	})
}

// httpClientJS drives `inbox mcp --http` with the TypeScript SDK's
// streamable HTTP client: node http_client.mjs URL TOKEN_FILE.
const httpClientJS = `
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, tokenFile] = process.argv.slice(2);
const fail = (msg) => {
  console.error("FAIL: " + msg);
  process.exit(1);
};

// Without the token, the server says 401.
const anon = new Client({ name: "anon", version: "1.0.0" });
let refused = "";
try {
  await anon.connect(new StreamableHTTPClientTransport(new URL(url)));
} catch (e) {
  refused = String(e);
}
if (!/no bearer token|401|unauthorized/i.test(refused)) fail("without the token: " + (refused || "connected"));

const token = readFileSync(tokenFile, "utf8").trim();
const client = new Client({ name: "inbox-ts-http-test", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: "Bearer " + token } },
}));
const call = (name, args = {}) => client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });

const { tools } = await client.listTools();
const run = tools.find((t) => t.name === "run");
if (!run || "exec" in (run.inputSchema.properties || {})) fail("run's input schema: " + JSON.stringify(run));

const pushed = await call("push", { name: "echo", prompt: "over http" });
if (pushed.isError) fail("push: " + JSON.stringify(pushed));
const bad = await call("run", { exec: "id" });
if (!bad.isError || bad.structuredContent?.error?.code !== "invalid_input" || bad.structuredContent.error.field !== "exec") {
  fail("run with exec: " + JSON.stringify(bad));
}
const ran = await call("run");
if (ran.isError) fail("run: " + JSON.stringify(ran));
const got = await call("receive", { from: "echo", max_wait_seconds: 30 });
if (got.structuredContent?.woke !== true || got.structuredContent.message.body !== "over http") fail("receive: " + JSON.stringify(got));

console.log(JSON.stringify({ ok: true, tools: tools.length }));
await client.close();
`
