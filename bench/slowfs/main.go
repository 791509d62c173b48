// Command slowfs mounts a directory through internal/crashfs with a delay
// added to every fsync and fdatasync, so that benchmarks can be rerun on a
// file system whose flushes are slow (2 ms: a laptop SSD without
// power-loss protection):
//
//	go run ./bench/slowfs -delay 2ms BACKING MOUNTPOINT
//
// It prints the mount point once mounted and serves until SIGINT or
// SIGTERM, then unmounts, leaving BACKING as it is (nothing is cut), and
// prints the flushes it served. It needs root and /dev/fuse.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/inbox-dev/inbox/internal/crashfs"
)

func main() {
	delay := flag.Duration("delay", 2*time.Millisecond, "time added to every fsync and fdatasync")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: slowfs [-delay 2ms] BACKING MOUNTPOINT")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	fsys, err := crashfs.Mount(flag.Arg(0), flag.Arg(1), crashfs.Options{SyncDelay: *delay})
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowfs:", err)
		os.Exit(1)
	}
	fmt.Println(fsys.Mountpoint())
	<-sig
	err = fsys.Unmount()
	s := fsys.Stats()
	fmt.Fprintf(os.Stderr, "slowfs: served %d fsyncs, %d fdatasyncs, %d directory fsyncs\n", s.Fsyncs, s.Fdatasyncs, s.DirFsyncs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowfs:", err)
		os.Exit(1)
	}
}
