package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// TestBoundedEndlessFIFO: a FIFO that never ends, given as --body-file,
// is read up to the store's maximum and one byte more, then refused with
// exit 30 naming --body-file (SPEC §8 "Input without end is bounded"):
// the command returns while the writer is still writing, and leaves
// nothing in the store. Text (read into memory) and bytes that are not
// text (streamed into a blob) take different paths; both are bounded.
func TestBoundedEndlessFIFO(t *testing.T) {
	bin := testproc.Installed(t, "inbox")
	for _, tc := range []struct {
		name  string
		chunk []byte
	}{
		{"text", []byte(strings.Repeat("endless text\n", 4096))},
		{"zeros", make([]byte, 64<<10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "db")
			env := append(os.Environ(), "INBOX_TEST_NATS=", "INBOX_AGENT=")
			init := exec.Command(bin, "--db", db, "init", "--max-blob", "1MiB")
			init.Env = env
			if out, err := init.CombinedOutput(); err != nil {
				t.Fatalf("init: %v\n%s", err, out)
			}
			fifo := filepath.Join(dir, "endless")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			// The writer writes until the reader is gone (EPIPE), however
			// much that is.
			wrote := make(chan int64, 1)
			go func() {
				var n int64
				defer func() { wrote <- n }()
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				defer f.Close()
				for {
					k, err := f.Write(tc.chunk)
					n += int64(k)
					if err != nil {
						return
					}
				}
			}()
			// The deadline only fails a command that would read forever.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--db", db, "--json", "send", "--from", "a", "--to", "b", "--subject", "endless", "--body-file", fifo)
			cmd.Env = env
			out, err := cmd.Output()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 30 {
				t.Fatalf("send --body-file FIFO: %v, want exit 30\n%s", err, out)
			}
			for _, want := range []string{`"code":"too_large"`, `"field":"body-file"`, `1 MiB`} {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %s:\n%s", want, out)
				}
			}
			if n := <-wrote; n > 8<<20 {
				t.Errorf("the writer got %d bytes in; reading must stop at the limit (1 MiB), give or take the pipe's buffer", n)
			}
			for _, sub := range []string{"tmp", "blobs"} {
				entries, _ := os.ReadDir(filepath.Join(db, sub))
				if len(entries) != 0 {
					t.Errorf("%s/ holds %d entries after the refusal, want none", sub, len(entries))
				}
			}
		})
	}
}
