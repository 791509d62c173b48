package crashfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// item is a file or directory of the durable tree.
type item struct {
	name string
	ino  uint64
	st   unix.Stat_t
	link bool    // a further name of an inode already in the tree
	data []byte  // a file's content, a symlink's target
	kids []*item // a directory's entries, in name order
}

// cutter reads the durable tree out of the backing directory and the
// model.
type cutter struct {
	m     *model
	paths map[uint64]string            // a path of each inode named in backing
	kids  map[uint64]map[string]uint64 // each backing directory's entries
	seen  map[uint64]bool
}

// cut rewrites the backing directory to the durable state. It runs
// unmounted, under mu.
func (fsys *FS) cut() error {
	c := cutter{
		m:     &fsys.m,
		paths: map[uint64]string{fsys.rootIno: fsys.backing},
		kids:  map[uint64]map[string]uint64{},
		seen:  map[uint64]bool{},
	}
	if err := c.index(fsys.backing, fsys.rootIno); err != nil {
		return err
	}
	root, err := c.build("", fsys.rootIno)
	if err != nil {
		return err
	}
	// All of it read: only now is backing emptied and rewritten.
	ents, err := os.ReadDir(fsys.backing)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(fsys.backing, e.Name())); err != nil {
			return err
		}
	}
	return write(fsys.backing, root.kids, map[uint64]string{})
}

// index records where each inode of the backing directory is now.
func (c *cutter) index(dir string, ino uint64) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	kids := make(map[string]uint64, len(ents))
	c.kids[ino] = kids
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		kids[e.Name()] = st.Ino
		if _, ok := c.paths[st.Ino]; ok {
			continue // a further hard link
		}
		c.paths[st.Ino] = p
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := c.index(p, st.Ino); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *cutter) stat(ino uint64) (st unix.Stat_t, err error) {
	if fd, ok := c.m.pins[ino]; ok {
		return st, unix.Fstat(fd, &st)
	}
	p, ok := c.paths[ino]
	if !ok {
		return st, fmt.Errorf("crashfs: durable inode %d is gone from the backing directory (changed outside the mount?)", ino)
	}
	return st, unix.Lstat(p, &st)
}

// path is where inode ino can be opened.
func (c *cutter) path(ino uint64) string {
	if fd, ok := c.m.pins[ino]; ok {
		return fmt.Sprintf("/proc/self/fd/%d", fd)
	}
	return c.paths[ino]
}

// build reads the durable tree under name, bound to inode ino.
func (c *cutter) build(name string, ino uint64) (*item, error) {
	st, err := c.stat(ino)
	if err != nil {
		return nil, err
	}
	it := &item{name: name, ino: ino, st: st}
	if c.seen[ino] {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil, nil // a directory durably named twice: kept once
		}
		it.link = true
		return it, nil
	}
	c.seen[ino] = true
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		ents := c.entries(ino)
		names := make([]string, 0, len(ents))
		for name := range ents {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			kid, err := c.build(name, ents[name])
			if err != nil {
				return nil, err
			}
			if kid != nil {
				it.kids = append(it.kids, kid)
			}
		}
	case unix.S_IFREG:
		it.data, err = c.content(ino)
	case unix.S_IFLNK:
		it.data, err = c.readlink(ino)
	}
	return it, err
}

// entries is directory ino's durable entries: its entries now, with the
// names changed since its last fsync bound as they were then.
func (c *cutter) entries(ino uint64) map[string]uint64 {
	ents := map[string]uint64{}
	// A directory with no name left (pinned) has no entries now.
	if _, pinned := c.m.pins[ino]; !pinned {
		for name, kid := range c.kids[ino] {
			ents[name] = kid
		}
	}
	for name, b := range c.m.dirs[ino] {
		if b.present {
			ents[name] = b.ino
		} else {
			delete(ents, name)
		}
	}
	return ents
}

// content is file ino's durable content.
func (c *cutter) content(ino uint64) ([]byte, error) {
	f, err := os.Open(c.path(ino))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fs := c.m.files[ino]
	if fs == nil {
		return io.ReadAll(f)
	}
	data := make([]byte, fs.clean, fs.size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("crashfs: reading the durable prefix of %s: %w", c.path(ino), err)
	}
	return append(data, fs.tail...), nil
}

func (c *cutter) readlink(ino uint64) ([]byte, error) {
	buf := make([]byte, unix.PathMax)
	var n int
	var err error
	if fd, ok := c.m.pins[ino]; ok {
		n, err = unix.Readlinkat(fd, "", buf)
	} else {
		n, err = unix.Readlink(c.paths[ino], buf)
	}
	if err != nil {
		return nil, fmt.Errorf("crashfs: readlink of inode %d: %w", ino, err)
	}
	return buf[:n], nil
}

// write creates kids in directory dir; made holds where each inode was
// created, for further hard links to it.
func write(dir string, kids []*item, made map[uint64]string) error {
	for _, it := range kids {
		p := filepath.Join(dir, it.name)
		if it.link {
			if err := os.Link(made[it.ino], p); err != nil {
				return err
			}
			continue
		}
		var err error
		switch it.st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err = unix.Mkdir(p, 0o700); err == nil {
				err = write(p, it.kids, made)
			}
		case unix.S_IFREG:
			err = os.WriteFile(p, it.data, 0o600)
		case unix.S_IFLNK:
			err = os.Symlink(string(it.data), p)
		default:
			err = unix.Mknod(p, it.st.Mode, int(it.st.Rdev))
		}
		if err == nil {
			err = unix.Lchown(p, int(it.st.Uid), int(it.st.Gid))
		}
		if err == nil && it.st.Mode&unix.S_IFMT != unix.S_IFLNK {
			err = unix.Chmod(p, it.st.Mode&0o7777)
		}
		if err != nil {
			return fmt.Errorf("crashfs: recreating %s: %w", p, err)
		}
		made[it.ino] = p
	}
	return nil
}
