// Package durable holds the fsync helpers the store, its index and the
// daemon's intake share: a directory's fsync (renameio makes a rename
// atomic, not durable) and concurrent fsyncs of staged files.
package durable

import (
	"os"
	"sync"

	"github.com/google/renameio/v2"
)

// SyncDir fsyncs a directory so that creations, renames and removals in
// it survive power loss.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncFiles fsyncs staged files, up to 32 at a time when there are
// several: each fsync ends in a device cache flush, and the disk merges
// concurrent flushes where one after another each pays a round trip. The
// caller then closes and renames them, in the order it needs.
func SyncFiles(pending []*renameio.PendingFile) error {
	return Concurrently(len(pending), func(i int) error { return pending[i].Sync() })
}

// Concurrently runs f(0) … f(n-1), up to 32 at a time (each blocked fsync
// holds an OS thread), and returns the first error by index.
func Concurrently(n int, f func(i int) error) error {
	if n == 1 {
		return f(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
