package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/natsbus"
)

// TestMain installs this test binary as "inbox" and as the helper on
// PATH; the tests, and every process they start, keep their temp files in
// one directory removed at the end (testproc.Main). The scripts and the
// process tests mostly wait (timeouts, leases, daemons), so twice as many
// run at once as there are CPUs, unless -parallel says otherwise.
func TestMain(m *testing.M) {
	testscript.Main(testproc.M(testproc.Parallel(m, 2*runtime.GOMAXPROCS(0))), map[string]func(){"inbox": func() { natsForTests(); os.Exit(Main()) }, "inbox-test-helper": helperMain})
}

// TestScripts runs the CLI scripts in testdata/script against the real
// binary (the test binary, installed as "inbox" on $PATH).
func TestScripts(t *testing.T) {
	t.Parallel() // beside the tests that wait, after the serial ones
	testscript.Run(t, scriptParams(filepath.Join("..", "..", "..", "testdata", "script")))
}

// scriptParams is the setup every script in dir runs with.
func scriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			e.Setenv("INBOX_DB", "")
			e.Setenv("INBOX_AGENT", "")
			// Control characters, for scripts that send them ('a'$ESC'b'):
			// ESC, BEL, CR, newline, tab, C1's CSI (U+009B) and a
			// right-to-left override (U+202E).
			for k, v := range map[string]string{"ESC": "\x1b", "BEL": "\a", "CR": "\r", "NL": "\n", "TAB": "\t", "CSI": "\u009b", "RLO": "\u202e"} {
				e.Setenv(k, v)
			}
			// A process the script left running detached (a task runner)
			// must not write into $WORK once it is removed.
			work := e.WorkDir
			e.Defer(func() { testproc.KillTagged("WORK", work, 10*time.Second) })
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"jget":       cmdJget,
			"jeq":        cmdJeq,
			"waitfile":   cmdWaitfile,
			"waitdaemon": cmdWaitdaemon,
			"exits":      cmdExits,
		},
	}
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

// waitArgs reads the arguments of a wait command, "name ARG [SECONDS]":
// ARG, and the time limit (default 10 s).
func waitArgs(ts *testscript.TestScript, neg bool, args []string, name, arg string) (string, time.Duration) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: %s %s [SECONDS]", name, arg)
	}
	limit := 10 * time.Second
	if len(args) == 2 {
		n, err := strconv.ParseFloat(args[1], 64)
		if err != nil {
			ts.Fatalf("%s: bad seconds %q", name, args[1])
		}
		limit = time.Duration(n * float64(time.Second))
	}
	return args[0], limit
}

// waitfile PATH [SECONDS]: wait until PATH exists (default 10 s).
func cmdWaitfile(ts *testscript.TestScript, neg bool, args []string) {
	path, limit := waitArgs(ts, neg, args, "waitfile", "PATH")
	p := ts.MkAbs(path)
	if !testproc.Poll(limit, func() bool { _, err := os.Stat(p); return err == nil }) {
		ts.Fatalf("%s did not appear within %v", path, limit)
	}
}

// waitdaemon DB [SECONDS]: wait until a daemon serves the store DB (it
// holds the store's daemon lock, locks/daemon.lock; default 10 s).
func cmdWaitdaemon(ts *testscript.TestScript, neg bool, args []string) {
	db, limit := waitArgs(ts, neg, args, "waitdaemon", "DB")
	p := filepath.Join(ts.MkAbs(db), "locks", "daemon.lock")
	if server := ts.Getenv("INBOX_TEST_NATS"); server != "" && ts.Getenv("INBOX_TEST_DIRS") == "" {
		// The store is the NATS store the directory maps to (nats_test.go),
		// and its daemon's lock is on this machine's side.
		var err error
		if p, err = natsbus.DaemonLockPath(natsStoreFor(server, ts.MkAbs(db)), ts.Getenv); err != nil {
			ts.Fatalf("%v", err)
		}
	}
	up := testproc.Poll(limit, func() bool {
		lk := flock.New(p, flock.SetFlag(os.O_RDWR))
		ok, err := lk.TryLock()
		if ok {
			lk.Unlock()
		}
		return err == nil && !ok // another process holds it: the daemon is up
	})
	if !up {
		ts.Fatalf("no daemon took the lock of %s within %v", db, limit)
	}
}

// exits N CMD ARGS...: run CMD and require exit status N (0, 10, 20, 30, 40,
// 50); its stdout and stderr are kept for the next assertions. CMD runs as
// exec runs it (the script's environment and directory, "inbox" from $PATH).
// It cannot be negated: the status it wants is the assertion.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N CMD ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil || want < 0 || want > 255 {
		ts.Fatalf("exits: bad exit status %q", args[0])
	}
	got, err := exitStatus(ts.Exec(args[1], args[2:]...))
	if err != nil {
		ts.Fatalf("exits: %s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// TestExitsFails proves exits can fail: a script that wants the wrong
// status, or negates exits, must fail, and one wanting the right status
// must pass.
func TestExitsFails(t *testing.T) {
	for _, c := range []struct {
		script string
		fail   string // "" when the script must pass
	}{
		{"exits 30 inbox send --bogus-flag\nstderr .\n", ""},
		{"exits 0 inbox send --bogus-flag\n", "inbox exited with status 30, want 0"},
		{"exits 30 inbox --version\n", "inbox exited with status 0, want 30"},
		{"! exits 0 inbox send --bogus-flag\n", "usage: exits N CMD ARGS..."},
		{"exits x inbox --version\n", `exits: bad exit status "x"`},
		{"exits 0 no-such-program-here\n", "exits: no-such-program-here:"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "s.txtar"), []byte(c.script), 0o666); err != nil {
			t.Fatal(err)
		}
		ft := &fakeT{}
		func() {
			defer func() {
				if r := recover(); r != nil && r != errFakeAbort {
					panic(r)
				}
			}()
			testscript.RunT(ft, scriptParams(dir))
		}()
		log := ft.log.String()
		switch {
		case c.fail == "" && ft.failed:
			t.Errorf("%q failed, want it to pass:\n%s", c.script, log)
		case c.fail != "" && !ft.failed:
			t.Errorf("%q passed, want it to fail with %q:\n%s", c.script, c.fail, log)
		case c.fail != "" && !strings.Contains(log, c.fail):
			t.Errorf("%q failed without %q:\n%s", c.script, c.fail, log)
		}
	}
}

// fakeT runs testscript.RunT and records, instead of reporting, a failure.
type fakeT struct {
	log    strings.Builder
	failed bool
}

var errFakeAbort = errors.New("script stopped")

func (t *fakeT) Skip(args ...any)  { panic(errFakeAbort) }
func (t *fakeT) Fatal(args ...any) { t.Log(args...); t.FailNow() }
func (t *fakeT) Parallel()         {}
func (t *fakeT) Log(args ...any)   { fmt.Fprintln(&t.log, args...) }
func (t *fakeT) FailNow()          { t.failed = true; panic(errFakeAbort) }
func (t *fakeT) Verbose() bool     { return false }
func (t *fakeT) Run(name string, f func(testscript.T)) {
	defer func() {
		if r := recover(); r != nil && r != errFakeAbort {
			panic(r)
		}
	}()
	f(t)
}
