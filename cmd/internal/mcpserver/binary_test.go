package mcpserver

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestInboxRunsInboxMCP builds the two binaries as the README does and
// checks the wiring: `inbox mcp` runs inbox-mcp beside it, which serves
// tools over stdio and shows its agent waiting.
func TestInboxRunsInboxMCP(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binaries: %v", err)
	}
	bin := t.TempDir()
	build := exec.Command(goBin, "build", "-o", bin+"/", "../../...")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	_, db := storetest.New(t, spool.Options{})
	cmd := exec.Command(filepath.Join(bin, "inbox"), "mcp", "--db", db, "--agent", "dev")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(s string) { io.WriteString(stdin, s+"\n") }
	read := func() map[string]any {
		t.Helper()
		got := make(chan map[string]any, 1)
		go func() {
			var v map[string]any
			if lines.Scan() {
				json.Unmarshal(lines.Bytes(), &v)
			}
			got <- v
		}()
		select {
		case v := <-got:
			return v
		case <-time.After(20 * time.Second):
			t.Fatal("no answer from inbox mcp")
			return nil
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if init := read(); init["result"] == nil {
		t.Fatalf("initialize: %v", init)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agents","arguments":{}}}`)
	res := read()
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `\"agent\":\"dev\",\"state\":\"waiting\"`) {
		t.Fatalf("agents through inbox mcp: %s", b)
	}
	// The process is inbox-mcp, which inbox replaced itself with.
	if exe, err := filepath.EvalSymlinks("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe"); err != nil || filepath.Base(exe) != "inbox-mcp" {
		t.Errorf("the server process is %q (%v), want inbox-mcp", exe, err)
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("inbox mcp ended with %v when its client went", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("inbox mcp did not end when its client closed stdin")
	}
}
