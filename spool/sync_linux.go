package spool

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back (its
// size), which is all an append needs.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// startWriteback asks the kernel to start writing f's dirty pages now, so
// that one later fsync commits the block allocations of several files in a
// single journal transaction.
func startWriteback(f *os.File) {
	syscall.SyncFileRange(int(f.Fd()), 0, 0, 2 /* SYNC_FILE_RANGE_WRITE */)
}
