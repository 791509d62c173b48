//go:build linux

package daemon

import (
	"fmt"
	"os"
	"syscall"
)

// identity names this very file (device, inode, change time): a retry
// after a crash sees the same identity, a new drop under the same name a
// different one.
func identity(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%d:%d", fi.ModTime().UnixNano(), fi.Size())
	}
	ct := st.Ctim
	return fmt.Sprintf("%d:%d:%d.%09d", st.Dev, st.Ino, ct.Sec, ct.Nsec)
}
