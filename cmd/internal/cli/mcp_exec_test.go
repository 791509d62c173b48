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

// TestMCPTokenFile: where inbox mcp --http writes its token. Inside a
// directory store; for a nats:// store in the user's configuration
// directory, under a name that does not depend on (or show) the
// credentials in the URL; --token-file wins.
func TestMCPTokenFile(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	wd, _ := os.Getwd()
	got, err := mcpTokenFile("", "store", env())
	if want := filepath.Join(wd, "store", "mcp.token"); err != nil || got != want {
		t.Errorf("directory store: %q %v, want %q", got, err, want)
	}
	got, err = mcpTokenFile("tok", "nats://h:4222/s", env())
	if want := filepath.Join(wd, "tok"); err != nil || got != want {
		t.Errorf("--token-file: %q %v, want %q", got, err, want)
	}
	withPW, err := mcpTokenFile("", "nats://alice:s3cretPW@nats.example:4222/team?replicas=3", env("XDG_CONFIG_HOME", "/cfg", "HOME", "/home/a"))
	if err != nil || !strings.HasPrefix(withPW, "/cfg/inbox/mcp-nats-") || !strings.HasSuffix(withPW, ".token") || strings.Contains(withPW, "s3cret") {
		t.Errorf("nats store with XDG_CONFIG_HOME: %q %v", withPW, err)
	}
	plain, _ := mcpTokenFile("", "nats://nats.example:4222/team", env("XDG_CONFIG_HOME", "/cfg"))
	if plain != withPW {
		t.Errorf("the credentials change the token file: %q and %q", withPW, plain)
	}
	if other, _ := mcpTokenFile("", "nats://nats.example:4222/other", env("XDG_CONFIG_HOME", "/cfg")); other == plain {
		t.Errorf("two stores share a token file: %q", other)
	}
	got, err = mcpTokenFile("", "nats://nats.example:4222/team", env("HOME", "/home/a"))
	if err != nil || filepath.Dir(got) != "/home/a/.config/inbox" || filepath.Base(got) != filepath.Base(plain) {
		t.Errorf("nats store with HOME: %q %v", got, err)
	}
	if got, err = mcpTokenFile("", "nats://nats.example:4222/team", env()); err == nil || exitCode(err) != exitInvalid {
		t.Errorf("nats store without HOME: %q %v, want a usage error", got, err)
	}
}
