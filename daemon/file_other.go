//go:build !linux

package daemon

import (
	"fmt"
	"io"
	"os"

	"github.com/inbox-dev/inbox/intake"
)

// readDescriptor reads a descriptor; the identity is the modification time
// and size where inode numbers are not at hand.
func readDescriptor(p string) ([]byte, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, intake.MaxSize+1))
	return data, fmt.Sprintf("%d:%d", fi.ModTime().UnixNano(), fi.Size()), err
}
