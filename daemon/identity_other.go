//go:build !linux

package daemon

import (
	"fmt"
	"os"
)

// identity names a file by its modification time and size where inode
// numbers and change times are not at hand.
func identity(fi os.FileInfo) string {
	return fmt.Sprintf("%d:%d", fi.ModTime().UnixNano(), fi.Size())
}
