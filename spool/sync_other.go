//go:build !linux

package spool

import (
	"os"
	"syscall"
)

// fdatasync falls back to a full fsync where fdatasync(2) is not offered.
func fdatasync(f *os.File) error {
	flushes.Add(1)
	return f.Sync()
}

// startWriteback is a hint; without sync_file_range(2) there is nothing to do.
func startWriteback(f *os.File) {}

// bootID is unknown where the system does not tell it: no flush is shared
// and every open of a format 2 store replays what its watermark has not
// covered.
func bootID() string { return "" }

// syncFS flushes every file system: the portable sync(2).
func syncFS(dir string) error {
	flushes.Add(1)
	syscall.Sync()
	return nil
}
