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
