package crashfs

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Options configures a mount.
type Options struct {
	// SyncDelay is added to every fsync and fdatasync, of files and of
	// directories, to model a slow disk (2 ms: a laptop SSD without
	// power-loss protection).
	SyncDelay time.Duration
}

// Stats counts the flushes served since Mount.
type Stats struct {
	Fsyncs     int64 // fsync of a file
	Fdatasyncs int64 // fdatasync of a file
	DirFsyncs  int64 // fsync or fdatasync of a directory
}

// FS is a mounted crashfs.
type FS struct {
	backing, mountpoint string
	opts                Options
	srv                 *fuse.Server
	rootIno             uint64

	// gate is held for reading by every operation that changes the
	// backing directory, and for writing to stop them all.
	gate    sync.RWMutex
	stopped bool

	mu sync.Mutex // guards m
	m  model

	fsyncs, fdatasyncs, dirFsyncs atomic.Int64
}

// Mount mounts a passthrough of directory backing at mountpoint. What is
// in backing now counts as durable.
func Mount(backing, mountpoint string, opts Options) (*FS, error) {
	var err error
	if backing, err = filepath.Abs(backing); err != nil {
		return nil, err
	}
	if mountpoint, err = filepath.Abs(mountpoint); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("crashfs: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, fmt.Errorf("crashfs: %s is not a directory", backing)
	}
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("crashfs: %w", err)
	}
	fsys := &FS{backing: backing, mountpoint: mountpoint, opts: opts, rootIno: st.Ino, m: newModel()}
	lb := root.(*fs.LoopbackNode)
	rn := &node{LoopbackNode: lb, fsys: fsys}
	lb.RootData.RootNode = rn
	sec := time.Second
	fsys.srv, err = fs.Mount(mountpoint, rn, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMount: true,
			FsName:      "crashfs",
			Name:        "crashfs",
			// Reads and writes passed through in the kernel would not
			// reach the model.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
		},
		// Every change goes through this mount, so the kernel may cache.
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NegativeTimeout: &sec,
	})
	if err != nil {
		return nil, fmt.Errorf("crashfs: mount %s: %w", mountpoint, err)
	}
	return fsys, nil
}

// Mountpoint returns where the file system is mounted.
func (fsys *FS) Mountpoint() string { return fsys.mountpoint }

// Backing returns the backing directory.
func (fsys *FS) Backing() string { return fsys.backing }

// Stats returns the flushes served so far.
func (fsys *FS) Stats() Stats {
	return Stats{
		Fsyncs:     fsys.fsyncs.Load(),
		Fdatasyncs: fsys.fdatasyncs.Load(),
		DirFsyncs:  fsys.dirFsyncs.Load(),
	}
}

// SyncAll makes everything durable as it is now, as a sync(2) that the
// kernel would pass on would.
func (fsys *FS) SyncAll() {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	fsys.m.reset()
}

// Unmount ends serving and leaves backing as it is now (not cut). It is
// idempotent, and a no-op after Cut.
func (fsys *FS) Unmount() error {
	err := fsys.stop()
	fsys.mu.Lock()
	fsys.m.reset()
	fsys.mu.Unlock()
	if errors.Is(err, errStopped) {
		return nil
	}
	return err
}

// Cut simulates a power cut: it stops serving (processes still using the
// mount get errors, so kill them first) and rewrites backing to the
// durable state. Afterwards backing can be used directly or mounted again.
func (fsys *FS) Cut() error {
	if err := fsys.stop(); err != nil {
		return err
	}
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	defer fsys.m.reset()
	return fsys.cut()
}

// fsyncFdatasync is FUSE_FSYNC_FDATASYNC, the flag of an fdatasync.
const fsyncFdatasync = 1

var errStopped = errors.New("crashfs: not mounted")

// stop turns away every further change and unmounts.
func (fsys *FS) stop() error {
	fsys.gate.Lock()
	stopped := fsys.stopped
	fsys.stopped = true
	fsys.gate.Unlock()
	if stopped {
		return errStopped
	}
	var err error
	for try := 0; try < 6; try++ {
		// Processes just killed may still be letting go of their files.
		if err = unix.Unmount(fsys.mountpoint, 0); err != unix.EBUSY {
			break
		}
		time.Sleep(time.Duration(try+1) * 10 * time.Millisecond)
	}
	if err == unix.EBUSY {
		// Still in use: detach it so that no mount is left behind. Its
		// users are served until they let go, but every change fails.
		if err = unix.Unmount(fsys.mountpoint, unix.MNT_DETACH); err == nil {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("crashfs: unmount %s: %w", fsys.mountpoint, err)
	}
	fsys.srv.Wait()
	return nil
}

// change runs op, which changes the tree, unless the file system is
// stopped; op runs under mu.
func (fsys *FS) change(op func(m *model) syscall.Errno) syscall.Errno {
	fsys.gate.RLock()
	defer fsys.gate.RUnlock()
	if fsys.stopped {
		return syscall.EIO
	}
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	return op(&fsys.m)
}

// modify runs op, which changes the bytes of file ino from offset off on,
// after saving the durable bytes it may overwrite.
func (fsys *FS) modify(ino uint64, off int64, src source, op func() syscall.Errno) syscall.Errno {
	fsys.gate.RLock()
	defer fsys.gate.RUnlock()
	if fsys.stopped {
		return syscall.EIO
	}
	fsys.mu.Lock()
	err := fsys.m.modifying(ino, off, src)
	fsys.mu.Unlock()
	if err != nil {
		return fs.ToErrno(err)
	}
	// Unlocked: a concurrent change saves only bytes below off.
	return op()
}

// synced serves an fsync or fdatasync of ino.
func (fsys *FS) synced(ino uint64, dir bool, flags uint32) syscall.Errno {
	if fsys.opts.SyncDelay > 0 {
		time.Sleep(fsys.opts.SyncDelay)
	}
	fsys.gate.RLock()
	defer fsys.gate.RUnlock()
	if fsys.stopped {
		return syscall.EIO
	}
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	switch {
	case dir:
		fsys.m.dirSynced(ino)
		fsys.dirFsyncs.Add(1)
	case flags&fsyncFdatasync != 0:
		fsys.m.fileSynced(ino)
		fsys.fdatasyncs.Add(1)
	default:
		fsys.m.fileSynced(ino)
		fsys.fsyncs.Add(1)
	}
	return 0
}
