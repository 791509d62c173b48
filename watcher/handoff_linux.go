package watcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Closing an inotify instance that holds a watch makes the kernel wait for
// an SRCU grace period, and a process cannot finish exiting until that is
// done: on the machines we measured it adds 10–20 ms to the exit of every
// short-lived waiter, longer than the whole wake-up. handOff gives a
// duplicate of the process's inotify descriptors to a child (cat, reading
// a pipe only this process holds), so that the last close — and the wait —
// happens in the child, after this process has exited and its caller has
// moved on. The child sees end of file on the pipe when we exit, and exits
// in turn. If anything here fails, nothing is lost but the saved time.

var (
	handOffOnce sync.Once
	handOffPipe *os.File // held open for the life of the process
)

func handOff() {
	handOffOnce.Do(func() {
		fds := inotifyFDs()
		if len(fds) == 0 {
			return
		}
		cat, err := exec.LookPath("cat")
		if err != nil {
			return
		}
		r, w, err := os.Pipe()
		if err != nil {
			return
		}
		defer r.Close()
		cmd := exec.Command(cat)
		cmd.Stdin = r
		cmd.Dir = "/"
		cmd.ExtraFiles = fds
		err = cmd.Start()
		for _, f := range fds {
			f.Close() // our duplicates; the originals stay with fsnotify
		}
		if err != nil {
			w.Close()
			return
		}
		handOffPipe = w
	})
}

// inotifyFDs returns duplicates of the process's inotify descriptors.
func inotifyFDs() []*os.File {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var out []*os.File
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || !strings.Contains(target, "inotify") {
			continue
		}
		dup, err := syscall.Dup(atoi(e.Name()))
		if err != nil {
			continue
		}
		syscall.CloseOnExec(dup)
		out = append(out, os.NewFile(uintptr(dup), "inotify"))
	}
	return out
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
