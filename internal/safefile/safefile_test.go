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

// TestDir: OpenDir opens a directory but refuses a link to one and a FIFO
// (without blocking) as NotRegularError; Dir.Open refuses what OpenFile
// refuses, and TryLock tells a lock another open file holds.
func TestDir(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "reg"), []byte("store"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink(sub, filepath.Join(dir, "link"))
	os.Symlink(filepath.Join(sub, "reg"), filepath.Join(sub, "link"))
	for _, p := range []string{filepath.Join(dir, "fifo"), filepath.Join(sub, "fifo")} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for p, what := range map[string]string{filepath.Join(dir, "link"): "a symbolic link", filepath.Join(dir, "fifo"): "a FIFO", filepath.Join(sub, "reg"): "a regular file"} {
		_, err := OpenDir(p)
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.What != what {
			t.Errorf("OpenDir(%s) = %v, want NotRegularError %q", p, err, what)
		}
	}
	if _, err := OpenDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenDir(missing) = %v, want fs.ErrNotExist", err)
	}
	d, err := OpenDir(sub)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if entries, err := d.Entries(); err != nil || len(entries) != 3 {
		t.Fatalf("Entries = %v, %v", entries, err)
	}
	for name, what := range map[string]string{"link": "a symbolic link", "fifo": "a FIFO"} {
		_, err := d.Open(name, os.O_RDONLY, 0)
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.What != what || nr.Path != filepath.Join(sub, name) {
			t.Errorf("Open(%s) = %v, want NotRegularError %q", name, err, what)
		}
	}
	f, err := d.Open("reg", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := d.Open("reg", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if ok, err := TryLock(f, syscall.LOCK_EX); !ok || err != nil {
		t.Fatalf("TryLock(free) = %v, %v", ok, err)
	}
	if ok, err := TryLock(g, syscall.LOCK_SH); ok || err != nil {
		t.Fatalf("TryLock(held) = %v, %v, want false", ok, err)
	}
	f.Close()
	if ok, err := TryLock(g, syscall.LOCK_SH); !ok || err != nil {
		t.Fatalf("TryLock(after close) = %v, %v", ok, err)
	}
}
