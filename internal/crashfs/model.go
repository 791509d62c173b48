package crashfs

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// model is what is durable, kept as the difference from the backing
// directory: whatever it does not mention is durable as the backing
// directory holds it now. Files and directories are named by their inode
// number in the backing file system. All of it is guarded by FS.mu.
type model struct {
	// files holds the files changed since their last fsync.
	files map[uint64]*fileState
	// dirs holds, for each directory, the durable binding of every name
	// changed in it since its last fsync.
	dirs map[uint64]map[string]binding
	// refs counts the bindings in dirs that name each inode.
	refs map[uint64]int
	// pins holds an O_PATH descriptor of each inode that has no name left
	// in the backing directory but is still durably named (refs > 0): it
	// keeps the inode's content readable and its number from being reused.
	pins map[uint64]int
}

// binding is a name's durable state in a directory: absent, or an inode.
type binding struct {
	ino     uint64
	present bool
}

// fileState is a file's durable content: the first clean bytes of the
// backing file, then tail, size bytes in all. The backing file may differ
// from it only from offset clean on, and is never shorter than clean.
type fileState struct {
	size, clean int64
	tail        []byte
}

func newModel() model {
	return model{
		files: map[uint64]*fileState{},
		dirs:  map[uint64]map[string]binding{},
		refs:  map[uint64]int{},
		pins:  map[uint64]int{},
	}
}

// reset makes everything durable as it is now.
func (m *model) reset() {
	for _, fd := range m.pins {
		unix.Close(fd)
	}
	*m = newModel()
}

// naming records name's durable binding in dir before it changes; cur is
// its binding now, which is the durable one unless name changed since the
// directory's last fsync.
func (m *model) naming(dir uint64, name string, cur binding) {
	names := m.dirs[dir]
	if names == nil {
		names = map[string]binding{}
		m.dirs[dir] = names
	}
	if _, ok := names[name]; ok {
		return
	}
	names[name] = cur
	if cur.present {
		m.refs[cur.ino]++
	}
}

// dirSynced makes dir's entries durable as they are now.
func (m *model) dirSynced(dir uint64) {
	names := m.dirs[dir]
	delete(m.dirs, dir)
	for _, b := range names {
		if b.present {
			m.unref(b.ino)
		}
	}
}

// unref drops one durable name of ino. An inode with no name left in the
// backing directory and now none in the durable tree is forgotten.
func (m *model) unref(ino uint64) {
	m.refs[ino]--
	if m.refs[ino] > 0 {
		return
	}
	delete(m.refs, ino)
	if fd, ok := m.pins[ino]; ok {
		unix.Close(fd)
		delete(m.pins, ino)
		m.forget(ino)
	}
}

// forget drops what the model holds about ino's own content.
func (m *model) forget(ino uint64) {
	delete(m.files, ino)
	m.dirSynced(ino)
}

// created records an inode that an operation has just made: its number
// may be one that a forgotten inode had. A new regular file's durable
// content is empty.
func (m *model) created(ino uint64, regular bool) {
	m.forget(ino)
	if regular {
		m.files[ino] = &fileState{}
	}
}

// removing is called before the last name of ino, at path, goes. If the
// inode is still durably named, it is pinned so that Cut can read it. The
// returned function, called with the operation's outcome, undoes the pin
// of a failed operation or forgets an inode named nowhere durably.
func (m *model) removing(ino uint64, path string) (done func(ok bool)) {
	pinned := false
	if m.refs[ino] > 0 {
		if _, ok := m.pins[ino]; !ok {
			fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == nil {
				m.pins[ino] = fd
				pinned = true
			}
			// Without the pin, Cut reports the inode as missing.
		}
	}
	return func(ok bool) {
		switch {
		case !ok && pinned:
			unix.Close(m.pins[ino])
			delete(m.pins, ino)
		case ok && m.refs[ino] == 0:
			m.forget(ino)
		}
	}
}

// source is a way to reach a file's bytes in the backing directory: an
// open descriptor of it, or else its path.
type source struct {
	fd   int
	path string
}

func (s source) stat(st *unix.Stat_t) error {
	if s.fd >= 0 {
		return unix.Fstat(s.fd, st)
	}
	return unix.Lstat(s.path, st)
}

func (s source) open() (*os.File, error) {
	if s.fd >= 0 {
		// Reopened for reading: the descriptor may be write-only.
		return os.Open(fmt.Sprintf("/proc/self/fd/%d", s.fd))
	}
	return os.Open(s.path)
}

// modifying is called before the bytes of file ino from offset off on
// change (a write, a truncate, a fallocate): it saves the durable bytes
// the change may overwrite.
func (m *model) modifying(ino uint64, off int64, src source) error {
	fs := m.files[ino]
	if fs == nil {
		var st unix.Stat_t
		if err := src.stat(&st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil
		}
		if _, pinned := m.pins[ino]; st.Nlink == 0 && !pinned {
			return nil // named nowhere, durably or not
		}
		fs = &fileState{size: st.Size, clean: st.Size}
		m.files[ino] = fs
	}
	if off >= fs.clean {
		return nil
	}
	f, err := src.open()
	if err != nil {
		return err
	}
	defer f.Close()
	saved := make([]byte, fs.clean-off, fs.clean-off+int64(len(fs.tail)))
	if _, err := f.ReadAt(saved, off); err != nil {
		if err == io.EOF {
			err = fmt.Errorf("crashfs: %s is shorter than its durable prefix (changed outside the mount?)", f.Name())
		}
		return err
	}
	fs.tail = append(saved, fs.tail...)
	fs.clean = off
	return nil
}

// fileSynced makes file ino's content durable as it is now.
func (m *model) fileSynced(ino uint64) {
	delete(m.files, ino)
}
