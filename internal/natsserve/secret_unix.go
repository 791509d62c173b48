//go:build unix

package natsserve

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openNoFollow opens path for reading, failing on a symlink and never
// blocking on a FIFO.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// ownedBySelf says whose fi is when it is not this process's user's.
func ownedBySelf(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); st.Uid != uint32(uid) {
		return fmt.Errorf("is owned by uid %d, not this user (uid %d)", st.Uid, uid)
	}
	return nil
}
