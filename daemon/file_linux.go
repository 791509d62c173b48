//go:build linux

package daemon

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/inbox-dev/inbox/intake"
)

// readDescriptor reads a descriptor without following a symlink or
// blocking on a FIFO, and returns its bytes and an identity of this very
// file (device, inode, change time): a retry after a crash sees the same
// identity, a new drop under the same name a different one.
func readDescriptor(p string) ([]byte, string, error) {
	fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, "", err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, "", fmt.Errorf("%s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, intake.MaxSize+1))
	if err != nil {
		return nil, "", err
	}
	ct := st.Ctim
	return data, fmt.Sprintf("%d:%d:%d.%09d", st.Dev, st.Ino, ct.Sec, ct.Nsec), nil
}
