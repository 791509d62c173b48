package queue

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procAttr puts a task in its own process group, and has the kernel kill
// its shell if the runner dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// procStart returns a process's start time (clock ticks since boot), 0 if
// there is no such process. With the pid it names one process for good:
// a reused pid has another start time.
func procStart(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" {
		return 0 // a zombie has finished
	}
	v, _ := strconv.ParseInt(f[19], 10, 64)
	return v
}

// umaskNow reads this process's umask without changing it, even for a
// moment (other goroutines may be creating files).
func umaskNow() (int, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			return int(n), err == nil
		}
	}
	return 0, false
}
