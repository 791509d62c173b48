package crashfs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mounted reports whether dir is a mount point in /proc/self/mounts.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && fields[1] == dir {
			return true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return false
}

// mountAt mounts backing at a new mount point, and unmounts it at the end
// of the test whatever happens, checking that no mount is left behind.
func mountAt(t *testing.T, backing string, opts Options) (*FS, string) {
	t.Helper()
	mnt := t.TempDir()
	fsys, err := Mount(backing, mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fsys.Unmount(); err != nil {
			t.Errorf("Unmount: %v", err)
		}
		if mounted(t, mnt) {
			t.Errorf("%s is still mounted", mnt)
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	if !mounted(t, mnt) {
		t.Fatalf("%s is not in /proc/self/mounts", mnt)
	}
	return fsys, mnt
}

// setup mounts a new backing directory; it returns the file system, the
// backing directory and the mount point.
func setup(t *testing.T, opts Options) (*FS, string, string) {
	t.Helper()
	backing := t.TempDir()
	fsys, mnt := mountAt(t, backing, opts)
	return fsys, backing, mnt
}

func cut(t *testing.T, fsys *FS) {
	t.Helper()
	if err := fsys.Cut(); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	if mounted(t, fsys.Mountpoint()) {
		t.Fatalf("%s is still mounted after Cut", fsys.Mountpoint())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// create writes a new file, fsyncing it when sync is true.
func create(t *testing.T, path, content string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	must(t, err)
	_, err = f.WriteString(content)
	must(t, err)
	if sync {
		must(t, f.Sync())
	}
	must(t, f.Close())
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
}

// want checks that path holds content after a cut.
func want(t *testing.T, path, content string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("after the cut: %v, want %q", err, content)
		return
	}
	if string(got) != content {
		t.Errorf("after the cut %s holds %q, want %q", filepath.Base(path), got, content)
	}
}

// writeUnlinked opens path for writing, removes it, writes data at its
// start through the open file, fsyncs it if sync, and closes it.
func writeUnlinked(t *testing.T, path, data string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	must(t, err)
	must(t, os.Remove(path))
	_, err = f.WriteAt([]byte(data), 0)
	must(t, err)
	if sync {
		must(t, f.Sync())
	}
	must(t, f.Close())
}

// gone checks that path does not exist after a cut.
func gone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("after the cut %s: %v, want it gone", filepath.Base(path), err)
	}
}

func TestFileContent(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	f, err := os.Create(filepath.Join(mnt, "synced"))
	must(t, err)
	_, err = f.WriteString("hello")
	must(t, err)
	must(t, f.Sync())
	_, err = f.WriteString(" world") // never synced
	must(t, err)
	must(t, f.Close())
	create(t, filepath.Join(mnt, "unsynced"), "data", false)
	syncDir(t, mnt)
	create(t, filepath.Join(mnt, "late"), "late", true) // named after the dir fsync

	// Before the cut, everything is there.
	want(t, filepath.Join(backing, "synced"), "hello world")
	if s := fsys.Stats(); s != (Stats{Fsyncs: 2, DirFsyncs: 1}) {
		t.Errorf("Stats = %+v, want 2 fsyncs and 1 dir fsync", s)
	}
	cut(t, fsys)
	want(t, filepath.Join(backing, "synced"), "hello")
	want(t, filepath.Join(backing, "unsynced"), "") // named, never synced
	gone(t, filepath.Join(backing, "late"))
}

func TestFsyncWithoutDirFsync(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	create(t, filepath.Join(mnt, "f"), "content", true)
	cut(t, fsys)
	gone(t, filepath.Join(backing, "f"))
}

func TestOverwriteAndTruncate(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	must(t, os.WriteFile(filepath.Join(backing, "a"), []byte("abcdef"), 0o644)) // durable: present at mount
	must(t, os.WriteFile(filepath.Join(backing, "b"), []byte("0123456789"), 0o644))

	f, err := os.OpenFile(filepath.Join(mnt, "a"), os.O_RDWR, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("XY"), 2)
	must(t, err)
	must(t, f.Sync()) // durable: abXYef
	_, err = f.WriteAt([]byte("ZZ"), 0)
	must(t, err)
	must(t, f.Truncate(3))
	_, err = f.WriteAt([]byte("tail"), 10)
	must(t, err)
	must(t, f.Close())

	must(t, os.Truncate(filepath.Join(mnt, "b"), 4)) // by path, no descriptor
	must(t, os.WriteFile(filepath.Join(mnt, "b"), []byte("new"), 0o644))
	cut(t, fsys)
	want(t, filepath.Join(backing, "a"), "abXYef")
	want(t, filepath.Join(backing, "b"), "0123456789")
}

func TestRename(t *testing.T) {
	for _, dirSync := range []bool{false, true} {
		t.Run(map[bool]string{false: "NoDirFsync", true: "DirFsync"}[dirSync], func(t *testing.T) {
			fsys, backing, mnt := setup(t, Options{})
			create(t, filepath.Join(mnt, "final"), "old", true)
			syncDir(t, mnt)
			create(t, filepath.Join(mnt, "tmp"), "new", true)
			must(t, os.Rename(filepath.Join(mnt, "tmp"), filepath.Join(mnt, "final")))
			if dirSync {
				syncDir(t, mnt)
			}
			cut(t, fsys)
			if dirSync {
				want(t, filepath.Join(backing, "final"), "new")
			} else {
				want(t, filepath.Join(backing, "final"), "old")
			}
			gone(t, filepath.Join(backing, "tmp"))
		})
	}
}

func TestCrossDirectoryRename(t *testing.T) {
	for _, c := range []struct {
		name         string
		syncA, syncB bool
		inA, inB     bool
	}{
		{"Neither", false, false, true, false},
		{"Source", true, false, false, false},
		{"Destination", false, true, true, true},
		{"Both", true, true, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys, backing, mnt := setup(t, Options{})
			must(t, os.Mkdir(filepath.Join(mnt, "a"), 0o755))
			must(t, os.Mkdir(filepath.Join(mnt, "b"), 0o755))
			create(t, filepath.Join(mnt, "a", "f"), "content", true)
			syncDir(t, filepath.Join(mnt, "a"))
			syncDir(t, mnt)
			must(t, os.Rename(filepath.Join(mnt, "a", "f"), filepath.Join(mnt, "b", "f")))
			if c.syncA {
				syncDir(t, filepath.Join(mnt, "a"))
			}
			if c.syncB {
				syncDir(t, filepath.Join(mnt, "b"))
			}
			cut(t, fsys)
			for _, x := range []struct {
				dir  string
				want bool
			}{{"a", c.inA}, {"b", c.inB}} {
				p := filepath.Join(backing, x.dir, "f")
				if x.want {
					want(t, p, "content")
				} else {
					gone(t, p)
				}
			}
			if c.inA && c.inB {
				sameFile(t, filepath.Join(backing, "a", "f"), filepath.Join(backing, "b", "f"))
			}
		})
	}
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	ia, err := os.Stat(a)
	must(t, err)
	ib, err := os.Stat(b)
	must(t, err)
	if !os.SameFile(ia, ib) {
		t.Errorf("%s and %s are different files, want one inode", a, b)
	}
}

func TestFdatasync(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	f, err := os.Create(filepath.Join(mnt, "f"))
	must(t, err)
	_, err = f.WriteString("data")
	must(t, err)
	must(t, unix.Fdatasync(int(f.Fd())))
	_, err = f.WriteString("more")
	must(t, err)
	must(t, f.Close())
	syncDir(t, mnt)
	if s := fsys.Stats(); s != (Stats{Fdatasyncs: 1, DirFsyncs: 1}) {
		t.Errorf("Stats = %+v, want 1 fdatasync and 1 dir fsync", s)
	}
	cut(t, fsys)
	want(t, filepath.Join(backing, "f"), "data")
}

func TestSyncAll(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	must(t, os.MkdirAll(filepath.Join(mnt, "d", "e"), 0o755))
	create(t, filepath.Join(mnt, "d", "e", "f"), "before", false)
	create(t, filepath.Join(mnt, "g"), "g", false)
	fsys.SyncAll()
	must(t, os.WriteFile(filepath.Join(mnt, "d", "e", "f"), []byte("after"), 0o644))
	must(t, os.Remove(filepath.Join(mnt, "g")))
	create(t, filepath.Join(mnt, "h"), "h", false)
	cut(t, fsys)
	want(t, filepath.Join(backing, "d", "e", "f"), "before")
	want(t, filepath.Join(backing, "g"), "g")
	gone(t, filepath.Join(backing, "h"))
}

func TestSyncDelay(t *testing.T) {
	const delay = 100 * time.Millisecond
	fsys, _, mnt := setup(t, Options{SyncDelay: delay})
	f, err := os.Create(filepath.Join(mnt, "f"))
	must(t, err)
	defer f.Close()
	for _, c := range []struct {
		name string
		sync func() error
	}{
		{"fsync", f.Sync},
		{"fdatasync", func() error { return unix.Fdatasync(int(f.Fd())) }},
		{"dir fsync", func() error { syncDir(t, mnt); return nil }},
	} {
		start := time.Now()
		must(t, c.sync())
		if d := time.Since(start); d < delay {
			t.Errorf("%s took %v, want at least %v", c.name, d, delay)
		}
	}
	if s := fsys.Stats(); s != (Stats{Fsyncs: 1, Fdatasyncs: 1, DirFsyncs: 1}) {
		t.Errorf("Stats = %+v, want one of each", s)
	}
}

func TestHardLinks(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	must(t, os.Mkdir(filepath.Join(mnt, "d"), 0o755))
	create(t, filepath.Join(mnt, "f"), "x", true)
	must(t, os.Link(filepath.Join(mnt, "f"), filepath.Join(mnt, "g")))
	must(t, os.Link(filepath.Join(mnt, "f"), filepath.Join(mnt, "d", "h")))
	syncDir(t, mnt)
	syncDir(t, filepath.Join(mnt, "d"))
	// Later changes, none synced: through one name, and removing another.
	f, err := os.OpenFile(filepath.Join(mnt, "g"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString("yz")
	must(t, err)
	must(t, f.Close())
	must(t, os.Remove(filepath.Join(mnt, "f")))
	cut(t, fsys)
	for _, name := range []string{"f", "g", "d/h"} {
		want(t, filepath.Join(backing, name), "x")
	}
	sameFile(t, filepath.Join(backing, "f"), filepath.Join(backing, "g"))
	sameFile(t, filepath.Join(backing, "f"), filepath.Join(backing, "d", "h"))
}

func TestMkdirWithoutParentFsync(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	must(t, os.Mkdir(filepath.Join(mnt, "kept"), 0o750))
	syncDir(t, mnt)
	must(t, os.Mkdir(filepath.Join(mnt, "lost"), 0o755))
	create(t, filepath.Join(mnt, "lost", "f"), "f", true)
	syncDir(t, filepath.Join(mnt, "lost"))
	create(t, filepath.Join(mnt, "kept", "f"), "f", true) // kept's own entries never synced
	cut(t, fsys)
	gone(t, filepath.Join(backing, "lost"))
	gone(t, filepath.Join(backing, "kept", "f"))
	st, err := os.Stat(filepath.Join(backing, "kept"))
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o750 {
		t.Errorf("kept after the cut: %v, %v; want a directory of mode 0750", st, err)
	}
}

// TestUnlinkWithDirFsync: removals made durable by the directory's fsync
// stay removed, whatever the inode numbers freed are reused for.
func TestUnlinkWithDirFsync(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	must(t, os.Mkdir(filepath.Join(mnt, "d"), 0o755))
	create(t, filepath.Join(mnt, "f"), "f", true)
	create(t, filepath.Join(mnt, "g"), "g", true)
	create(t, filepath.Join(mnt, "d", "h"), "h", true)
	syncDir(t, mnt)
	syncDir(t, filepath.Join(mnt, "d"))

	writeUnlinked(t, filepath.Join(mnt, "f"), "ZZ", false) // removed while open
	must(t, os.Remove(filepath.Join(mnt, "g")))
	must(t, os.Remove(filepath.Join(mnt, "d", "h")))
	must(t, os.Remove(filepath.Join(mnt, "d")))
	syncDir(t, mnt)
	must(t, os.Mkdir(filepath.Join(mnt, "d"), 0o755)) // not synced
	create(t, filepath.Join(mnt, "other"), "other", true)
	cut(t, fsys)
	for _, name := range []string{"f", "g", "d", "other"} {
		gone(t, filepath.Join(backing, name))
	}
}

// TestUnlinkComesBack: removals never made durable are undone by a cut,
// files with their durable content and directories with their entries.
func TestUnlinkComesBack(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	must(t, os.Mkdir(filepath.Join(mnt, "d"), 0o755))
	create(t, filepath.Join(mnt, "f"), "keep", true)
	create(t, filepath.Join(mnt, "d", "g"), "in d", true)
	syncDir(t, mnt)
	syncDir(t, filepath.Join(mnt, "d"))

	// f is unlinked while open and written to afterwards, even synced;
	// d is emptied and removed. No directory is synced.
	writeUnlinked(t, filepath.Join(mnt, "f"), "ZZ", false)
	must(t, os.Remove(filepath.Join(mnt, "d", "g")))
	must(t, os.Remove(filepath.Join(mnt, "d")))
	// New files, which may reuse the inode numbers just freed.
	for i := range 20 {
		create(t, filepath.Join(mnt, "new"+string(rune('a'+i))), "new", true)
	}
	cut(t, fsys)
	want(t, filepath.Join(backing, "f"), "keep")
	want(t, filepath.Join(backing, "d", "g"), "in d")
	gone(t, filepath.Join(backing, "newa"))
}

func TestUnlinkedThenSynced(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	create(t, filepath.Join(mnt, "f"), "keep", true)
	syncDir(t, mnt)
	writeUnlinked(t, filepath.Join(mnt, "f"), "SY", true) // the unlinked file's content is durable; its name still is too
	cut(t, fsys)
	want(t, filepath.Join(backing, "f"), "SYep")
}

func TestModesAndSymlinks(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	must(t, os.Mkdir(filepath.Join(mnt, "d"), 0o700))
	create(t, filepath.Join(mnt, "d", "x"), "x", true)
	must(t, os.Chmod(filepath.Join(mnt, "d", "x"), 0o640))
	must(t, os.Symlink("d/x", filepath.Join(mnt, "link")))
	syncDir(t, filepath.Join(mnt, "d"))
	syncDir(t, mnt)
	cut(t, fsys)
	for name, mode := range map[string]os.FileMode{"d": os.ModeDir | 0o700, "d/x": 0o640, "link": os.ModeSymlink | 0o777} {
		st, err := os.Lstat(filepath.Join(backing, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if st.Mode() != mode {
			t.Errorf("%s has mode %v after the cut, want %v", name, st.Mode(), mode)
		}
	}
	if target, err := os.Readlink(filepath.Join(backing, "link")); err != nil || target != "d/x" {
		t.Errorf("link -> %q, %v; want d/x", target, err)
	}
	want(t, filepath.Join(backing, "link"), "x")
}

// TestChildProcesses runs the changes in other processes: they go through
// the mount as the test's own do. sync(2) and syncfs(2) reach no FUSE
// server on this kernel (it sends FUSE_SYNCFS to virtiofs only), so they
// make nothing durable here; fsync(2) does.
func TestChildProcesses(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	sh := func(script string) {
		t.Helper()
		// The shell changes into the mount itself: with cmd.Dir, the child
		// would chdir between clone and exec, where this process, which
		// serves the mount, may not be able to answer (see Mount).
		cmd := exec.Command("sh", "-c", `cd "$MNT" && `+script)
		cmd.Env = append(os.Environ(), "MNT="+mnt)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	sh("printf x > bysync; sync; sync -f bysync")
	if s := fsys.Stats(); s != (Stats{}) {
		t.Errorf("Stats after sync(2) and syncfs(2) = %+v, want none seen", s)
	}
	sh("printf y > byfsync; printf z > unsynced; sync byfsync; sync .; printf more >> byfsync")
	if s := fsys.Stats(); s != (Stats{Fsyncs: 1, DirFsyncs: 1}) {
		t.Errorf("Stats after sync FILE and sync DIR = %+v, want 1 fsync and 1 dir fsync", s)
	}
	cut(t, fsys)
	want(t, filepath.Join(backing, "bysync"), "") // named by the later dir fsync, content never synced
	want(t, filepath.Join(backing, "byfsync"), "y")
	want(t, filepath.Join(backing, "unsynced"), "")

	// A file written by a child and never fsynced, its directory neither.
	fsys, mnt = mountAt(t, backing, Options{})
	sh("printf x > later; sync")
	cut(t, fsys)
	gone(t, filepath.Join(backing, "later"))
	want(t, filepath.Join(backing, "byfsync"), "y")
}

// TestRemount: after a cut, backing can be mounted again and its state is
// durable there.
func TestRemount(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	create(t, filepath.Join(mnt, "f"), "one", true)
	syncDir(t, mnt)
	cut(t, fsys)
	fsys, mnt = mountAt(t, backing, Options{})
	want(t, filepath.Join(mnt, "f"), "one")
	must(t, os.WriteFile(filepath.Join(mnt, "f"), []byte("two"), 0o644))
	cut(t, fsys)
	want(t, filepath.Join(backing, "f"), "one")
}

// TestCutWhileInUse: a descriptor still open on the mount does not stop a
// cut; it gets errors afterwards, and no mount is left behind.
func TestCutWhileInUse(t *testing.T) {
	fsys, backing, mnt := setup(t, Options{})
	create(t, filepath.Join(mnt, "f"), "durable", true)
	syncDir(t, mnt)
	f, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	cut(t, fsys)
	if _, err := f.WriteAt([]byte("late"), 0); err == nil {
		t.Error("a write through a descriptor opened before the cut succeeded")
	}
	want(t, filepath.Join(backing, "f"), "durable")
}

// TestOnlyTestsImport: the product's code does not import crashfs; only
// tests and bench/slowfs do.
func TestOnlyTestsImport(t *testing.T) {
	cmd := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "github.com/inbox-dev/inbox/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const self = "github.com/inbox-dev/inbox/internal/crashfs"
	for _, line := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == "github.com/inbox-dev/inbox/bench/slowfs" {
			continue
		}
		for _, imp := range fields[1:] {
			if imp == self {
				t.Errorf("%s imports crashfs outside its tests", fields[0])
			}
		}
	}
}
