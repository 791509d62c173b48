package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"inbox": main, "inbox-test-helper": helperMain})
}

// TestScripts runs the CLI scripts in testdata/script against the real
// binary (the test binary, installed as "inbox" on $PATH).
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			e.Setenv("INBOX_DB", "")
			e.Setenv("INBOX_AGENT", "")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jget":     cmdJget,
			"jeq":      cmdJeq,
			"waitfile": cmdWaitfile,
		},
	})
}

// jsonPath walks a dotted path ("thread.thread_id", "threads.0.status",
// "threads.len" for a length) through the JSON in the last command's stdout.
func jsonPath(ts *testscript.TestScript, path string) any {
	var v any
	out := ts.ReadFile("stdout")
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		ts.Fatalf("stdout is not one JSON value: %v\n%s", err, out)
	}
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			val, ok := x[part]
			if !ok {
				ts.Fatalf("%s: no member %q in %s", path, part, out)
			}
			v = val
		case []any:
			if part == "len" {
				return float64(len(x))
			}
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				ts.Fatalf("%s: bad index %q (length %d)", path, part, len(x))
			}
			v = x[i]
		default:
			ts.Fatalf("%s: cannot index %T with %q", path, v, part)
		}
	}
	return v
}

func render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// jget PATH VAR: set $VAR to the value at PATH in stdout's JSON.
func cmdJget(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jget PATH VAR")
	}
	ts.Setenv(args[1], render(jsonPath(ts, args[0])))
}

// jeq PATH VALUE: assert that the value at PATH in stdout's JSON is VALUE
// (strings compare raw; numbers, booleans and null as JSON text).
func cmdJeq(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: jeq PATH VALUE")
	}
	got := render(jsonPath(ts, args[0]))
	if (got == args[1]) == neg {
		if neg {
			ts.Fatalf("%s: got %q, want anything else", args[0], got)
		}
		ts.Fatalf("%s: got %q, want %q", args[0], got, args[1])
	}
}

// waitfile PATH [SECONDS]: wait until PATH exists (default 10 s).
func cmdWaitfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitfile PATH [SECONDS]")
	}
	limit := 10 * time.Second
	if len(args) == 2 {
		n, err := strconv.ParseFloat(args[1], 64)
		if err != nil {
			ts.Fatalf("waitfile: bad seconds %q", args[1])
		}
		limit = time.Duration(n * float64(time.Second))
	}
	p := ts.MkAbs(args[0])
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(p); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.Fatalf("%s did not appear within %v", args[0], limit)
}
