package safefile

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenFile: a regular file opens; a symbolic link (to a regular file),
// a FIFO (which would block a plain open for reading), a socket and a
// directory are refused as NotRegularError naming what they are, and the
// link's target is not touched by an open for writing.
func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("store"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(reg); err != nil || string(b) != "store" {
		t.Fatalf("ReadFile(regular) = %q, %v", b, err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(reg, link)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for path, what := range map[string]string{link: "a symbolic link", fifo: "a FIFO", filepath.Join(dir, "s"): "a socket", dir: "a directory"} {
		for _, flag := range []int{os.O_RDONLY, os.O_WRONLY | os.O_TRUNC | os.O_CREATE} {
			_, err := OpenFile(path, flag, 0o600)
			var nr *NotRegularError
			if !errors.As(err, &nr) || nr.What != what || !errors.Is(err, ErrNotRegular) {
				t.Errorf("OpenFile(%s, %#x) = %v, want NotRegularError %q", path, flag, err, what)
			}
		}
	}
	if b, _ := os.ReadFile(reg); string(b) != "store" {
		t.Errorf("an open through the link truncated its target: %q", b)
	}
	if _, err := OpenFile(filepath.Join(dir, "missing"), os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}
