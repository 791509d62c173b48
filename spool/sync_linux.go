package spool

import (
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data and the metadata needed to read it back (its
// size), which is all an append needs.
func fdatasync(f *os.File) error {
	flushes.Add(1)
	if flushDelay > 0 {
		time.Sleep(flushDelay) // tests: a slow disk
	}
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

// bootID identifies this boot of the machine: a file written before the
// machine last crashed or restarted was written under another boot id.
func bootID() string {
	bootOnce.Do(func() {
		data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if err == nil {
			boot = strings.TrimSpace(string(data))
		}
	})
	return boot
}

var (
	bootOnce sync.Once
	boot     string
)

// syncFS flushes the whole file system holding dir (syncfs(2)): one flush
// for every file the store wrote since the last.
func syncFS(dir string) error {
	flushes.Add(1)
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		if err := unix.Syncfs(int(f.Fd())); err != unix.EINTR {
			return err
		}
	}
}

// flushDelay is added to every fdatasync, in tests that model a slow disk.
var flushDelay time.Duration
