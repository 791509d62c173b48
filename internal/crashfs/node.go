package crashfs

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is a loopback node that records each change in the model before
// making it.
type node struct {
	*fs.LoopbackNode
	fsys *FS
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
)

// WrapChild makes every node of the tree a *node.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fsys: n.fsys}
}

// ino is the node's inode number in the backing file system.
func (n *node) ino() uint64 {
	if n.IsRoot() {
		return n.fsys.rootIno
	}
	return n.StableAttr().Ino
}

// path is the backing path of name in directory n, or of n for "".
func (n *node) path(name string) string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()), name)
}

// bind records the durable binding of name in directory n before a change
// to it, and returns what name is now.
func (n *node) bind(m *model, name string) (st unix.Stat_t, present bool, errno syscall.Errno) {
	switch err := unix.Lstat(n.path(name), &st); err {
	case nil:
		m.naming(n.ino(), name, binding{ino: st.Ino, present: true})
		return st, true, 0
	case unix.ENOENT:
		m.naming(n.ino(), name, binding{})
		return st, false, 0
	default:
		return st, false, fs.ToErrno(err)
	}
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	var ch *fs.Inode
	var fh fs.FileHandle
	var fuseFlags uint32
	errno := n.fsys.change(func(m *model) syscall.Errno {
		st, existed, errno := n.bind(m, name)
		if errno != 0 {
			return errno
		}
		if existed && flags&syscall.O_TRUNC != 0 {
			if err := m.modifying(st.Ino, 0, source{fd: -1, path: n.path(name)}); err != nil {
				return fs.ToErrno(err)
			}
		}
		ch, fh, fuseFlags, errno = n.LoopbackNode.Create(ctx, name, flags, mode, out)
		if errno == 0 && !existed {
			m.created(ch.StableAttr().Ino, true)
		}
		return errno
	})
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, wrapFile(ch.Operations().(*node), fh), fuseFlags, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	var fh fs.FileHandle
	var fuseFlags uint32
	open := func() (errno syscall.Errno) {
		fh, fuseFlags, errno = n.LoopbackNode.Open(ctx, flags)
		return errno
	}
	var errno syscall.Errno
	if flags&syscall.O_TRUNC != 0 {
		// The kernel truncates with SETATTR instead (crashfs does not
		// ask for atomic O_TRUNC), but in case it does not:
		errno = n.fsys.modify(n.ino(), 0, source{fd: -1, path: n.path("")}, open)
	} else {
		errno = open()
	}
	if errno != 0 {
		return nil, 0, errno
	}
	return wrapFile(n, fh), fuseFlags, 0
}

// made records a name bound to a new inode.
func (n *node) made(name string, mk func() (*fs.Inode, syscall.Errno), regular bool) (*fs.Inode, syscall.Errno) {
	var ch *fs.Inode
	errno := n.fsys.change(func(m *model) syscall.Errno {
		if _, _, errno := n.bind(m, name); errno != 0 {
			return errno
		}
		var errno syscall.Errno
		if ch, errno = mk(); errno == 0 {
			m.created(ch.StableAttr().Ino, regular)
		}
		return errno
	})
	return ch, errno
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.made(name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Mkdir(ctx, name, mode, out) }, false)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.made(name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out) },
		mode&syscall.S_IFMT == syscall.S_IFREG)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.made(name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Symlink(ctx, target, name, out) }, false)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var ch *fs.Inode
	errno := n.fsys.change(func(m *model) syscall.Errno {
		if _, _, errno := n.bind(m, name); errno != 0 {
			return errno
		}
		var errno syscall.Errno
		ch, errno = n.LoopbackNode.Link(ctx, target, name, out)
		return errno
	})
	return ch, errno
}

// remove records the removal of name, then does it with op.
func (n *node) remove(name string, op func() syscall.Errno) syscall.Errno {
	return n.fsys.change(func(m *model) syscall.Errno {
		st, present, errno := n.bind(m, name)
		if errno != 0 {
			return errno
		}
		if !present {
			return syscall.ENOENT
		}
		done := func(bool) {}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR || st.Nlink <= 1 {
			done = m.removing(st.Ino, n.path(name))
		}
		errno = op()
		done(errno == 0)
		return errno
	})
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, func() syscall.Errno { return n.LoopbackNode.Unlink(ctx, name) })
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, func() syscall.Errno { return n.LoopbackNode.Rmdir(ctx, name) })
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	return n.fsys.change(func(m *model) syscall.Errno {
		src, present, errno := n.bind(m, name)
		if errno != 0 {
			return errno
		}
		if !present {
			return syscall.ENOENT
		}
		dst, replaced, errno := np.bind(m, newName)
		if errno != 0 {
			return errno
		}
		done := func(bool) {}
		if replaced && flags&fs.RENAME_EXCHANGE == 0 && dst.Ino != src.Ino &&
			(dst.Mode&unix.S_IFMT == unix.S_IFDIR || dst.Nlink <= 1) {
			done = m.removing(dst.Ino, np.path(newName))
		}
		errno = n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
		done(errno == 0)
		return errno
	})
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	setattr := func() syscall.Errno { return n.LoopbackNode.Setattr(ctx, f, in, out) }
	size, ok := in.GetSize()
	if !ok {
		return n.fsys.change(func(*model) syscall.Errno { return setattr() })
	}
	src := source{fd: -1}
	if h, ok := f.(*file); ok {
		src = h.source()
	} else {
		src.path = n.path("")
	}
	return n.fsys.modify(n.ino(), int64(size), src, setattr)
}

// Fsync serves fsync and fdatasync of files (FSYNC) and of directories
// (FSYNCDIR: dir has no Fsyncdir, so go-fuse comes here).
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	return n.fsys.synced(n.ino(), n.IsDir(), flags)
}

// CopyFileRange is declined, so that the kernel falls back to reads and
// writes, which the model sees.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, len uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// loopbackDir is what go-fuse's loopback directory handle does, less
// Fsyncdir, which Fsync above serves.
type loopbackDir interface {
	fs.FileReaddirenter
	fs.FileSeekdirer
	fs.FileReleasedirer
}

type dir struct{ loopbackDir }

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	d, ok := fh.(loopbackDir)
	if !ok {
		return nil, 0, syscall.EIO
	}
	return dir{d}, fuseFlags, 0
}

// loopbackFile is what go-fuse's loopback file handle does, less Fsync,
// which node.Fsync serves, and PassthroughFd: reads and writes passed
// through in the kernel would not reach the model.
type loopbackFile interface {
	fs.FileReader
	fs.FileWriter
	fs.FileWritever
	fs.FileReleaser
	fs.FileFlusher
	fs.FileGetattrer
	fs.FileStatxer
	fs.FileSetattrer
	fs.FileLseeker
	fs.FileGetlker
	fs.FileSetlker
	fs.FileSetlkwer
	fs.FileAllocater
	fs.FileIoctler
}

// file is an open file whose writes are recorded in the model first.
type file struct {
	loopbackFile
	lf *fs.LoopbackFile
	n  *node
}

func wrapFile(n *node, fh fs.FileHandle) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh
	}
	return &file{loopbackFile: lf, lf: lf, n: n}
}

// source reaches the file through its open descriptor, which works after
// the file is unlinked.
func (f *file) source() source {
	if fd, ok := f.lf.PassthroughFd(); ok {
		return source{fd: fd}
	}
	return source{fd: -1, path: f.n.path("")}
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (written uint32, errno syscall.Errno) {
	errno = f.n.fsys.modify(f.n.ino(), off, f.source(), func() syscall.Errno {
		written, errno = f.loopbackFile.Write(ctx, data, off)
		return errno
	})
	return written, errno
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (written uint32, errno syscall.Errno) {
	errno = f.n.fsys.modify(f.n.ino(), off, f.source(), func() syscall.Errno {
		written, errno = f.loopbackFile.Writev(ctx, data, off)
		return errno
	})
	return written, errno
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return f.n.fsys.modify(f.n.ino(), int64(off), f.source(), func() syscall.Errno {
		return f.loopbackFile.Allocate(ctx, off, size, mode)
	})
}
