//go:build !linux

package spool

import "os"

// fdatasync falls back to a full fsync where fdatasync(2) is not offered.
func fdatasync(f *os.File) error { return f.Sync() }

// startWriteback is a hint; without sync_file_range(2) there is nothing to do.
func startWriteback(f *os.File) {}
