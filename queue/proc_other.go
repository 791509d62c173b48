//go:build !linux

package queue

import "syscall"

// procAttr puts a task in its own process group.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// procStart reports 1 for a live process and 0 otherwise where process
// start times are not at hand.
func procStart(pid int) int64 {
	if syscall.Kill(pid, 0) == nil {
		return 1
	}
	return 0
}

// umaskNow reports false: reading the umask means changing it, which is
// not safe while other goroutines create files.
func umaskNow() (int, bool) { return 0, false }
