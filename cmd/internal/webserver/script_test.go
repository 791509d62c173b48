package webserver

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the scripts of testdata/web: inbox web's flags, errors
// and exit codes, black-box, with the dashboard served in process.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("..", "..", "..", "testdata", "web"),
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exits CODE CMD ARGS... runs the command and checks its exit code.
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exits CODE CMD [ARGS...]")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exits: %q is not an exit code", args[0])
				}
				err = ts.Exec(args[1], args[2:]...)
				got := 0
				if ee, ok := err.(*exec.ExitError); ok {
					got = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("exits: %v", err)
				}
				if got != want {
					ts.Fatalf("%v: exit %d, want %d", args[1:], got, want)
				}
			},
		},
	})
}
