//go:build !unix

package natsserve

import (
	"io/fs"
	"os"
)

// openNoFollow opens path for reading; the Lstat before it refused a
// symlink.
func openNoFollow(path string) (*os.File, error) { return os.Open(path) }

// ownedBySelf checks nothing where files have no owner uid.
func ownedBySelf(fs.FileInfo) error { return nil }
