// Package testproc holds what the process tests of several packages share:
// a private temp directory for a whole test binary and the processes it
// starts, children that are killed and waited for when their test ends,
// polling for a condition no signal announces, finding the binaries
// testscript.Main installs, and the switch between the default run and
// the long one (-tags long), and the loops of codec benchmarks. Only
// tests import it.
//
// # Guarantees
//
// A test binary whose TestMain runs through [Main] leaves nothing in the
// temp directory it was started with: every t.TempDir, every file a child
// process writes under $TMPDIR, is under one directory removed at exit.
package testproc

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"
)

// Main runs run (a TestMain's m.Run, or testscript.Main's) with $TMPDIR
// set to a fresh directory inside the original temp directory, so that
// the tests' temp directories and whatever their child processes leave in
// $TMPDIR (a killed process's temp file) are inside it. It removes the
// directory afterwards, naming on stderr what tests and children left
// there when INBOX_TEST_LEFTOVERS is set, and returns run's exit code.
func Main(run func() int) int {
	dir, err := os.MkdirTemp("", "inbox-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testproc:", err)
		return 1
	}
	// Others may pass through, as through /tmp, not list it: a test that
	// runs a process as another user gives it a directory of its own
	// inside (every test's own directory is still 0700).
	if err := os.Chmod(dir, 0o711); err != nil {
		fmt.Fprintln(os.Stderr, "testproc:", err)
		return 1
	}
	old, had := os.LookupEnv("TMPDIR")
	os.Setenv("TMPDIR", dir)
	code := run()
	if had {
		os.Setenv("TMPDIR", old)
	} else {
		os.Unsetenv("TMPDIR")
	}
	if os.Getenv("INBOX_TEST_LEFTOVERS") != "" {
		for _, name := range Leftovers(dir) {
			fmt.Fprintf(os.Stderr, "testproc: left in the temp directory: %s\n", name)
		}
	}
	// A test that made a directory read-only must not keep it there.
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "testproc: removing the temp directory:", err)
	}
	return code
}

// Runner is what a TestMain runs: *testing.M, or what [M] returns.
type Runner interface{ Run() int }

// M wraps m so that its Run runs through [Main]: a TestMain calls
// os.Exit(testproc.M(m).Run()), or hands testproc.M(m) to
// testscript.Main.
func M(m Runner) Runner { return mainRunner{m} }

type mainRunner struct{ m Runner }

func (r mainRunner) Run() int { return Main(r.m.Run) }

// Parallel wraps m so that, unless go test was given -parallel, up to n
// parallel tests run at once instead of GOMAXPROCS: for tests that
// mostly wait on the processes they start (CLI scripts with their
// timeouts, daemons, leases), not on the CPU.
func Parallel(m Runner, n int) Runner { return parallelRunner{m, n} }

type parallelRunner struct {
	m Runner
	n int
}

func (r parallelRunner) Run() int {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && flag.Lookup("test.parallel") != nil {
		flag.Set("test.parallel", strconv.Itoa(r.n))
	}
	return r.m.Run()
}

// Leftovers lists the entries of dir, sorted: what is left in a temp
// directory once the tests that used it ended.
func Leftovers(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// Eventually calls cond every 10 ms until it reports true, failing tb
// (with what) when limit passes first. It is for conditions no signal of
// the code announces: a file another process writes, a lock it takes.
func Eventually(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Poll(limit, cond) {
		tb.Fatalf("%s: not within %v", what, limit)
	}
}

// Poll calls cond every 10 ms until it reports true, for at most limit;
// it reports whether cond did.
func Poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Installed is the path of a program testscript.Main installed on $PATH
// (the test binary under another name), failing tb when it is missing.
func Installed(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s is not on PATH (testscript.Main installs it): %v", name, err)
	}
	return p
}

// Start starts cmd and, when tb ends, kills it and waits for it unless
// the test already waited for it, so that no test leaves a process behind.
func Start(tb testing.TB, cmd *exec.Cmd) {
	tb.Helper()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
}
