//go:build !linux

package watcher

import "os"

// statKey returns a file's size and modification time in nanoseconds.
func statKey(p string) (size, mtime int64, ok bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, 0, false
	}
	return fi.Size(), fi.ModTime().UnixNano(), true
}
