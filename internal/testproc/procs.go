package testproc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// KillTagged kills every process of this user whose environment holds
// key=value (on Linux, read from /proc) and waits, up to limit, until
// none of them runs any more. Processes a test started detached (a task
// runner in its own session) inherit the test's environment, so a tag
// such as testscript's WORK=$WORK finds them after their parent is gone:
// killed before the test's directory is removed, they cannot write into
// it afterwards. It returns how many it killed.
func KillTagged(key, value string, limit time.Duration) int {
	tag := []byte(key + "=" + value)
	killed := map[int]bool{}
	deadline := time.Now().Add(limit)
	for {
		alive := 0
		for _, pid := range taggedPids(tag) {
			alive++
			if !killed[pid] {
				syscall.Kill(pid, syscall.SIGKILL)
				killed[pid] = true
			}
		}
		if alive == 0 || time.Now().After(deadline) {
			return len(killed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// taggedPids lists the running (not zombie) processes other than this one
// whose environment holds tag.
func taggedPids(tag []byte) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !hasVar(env, tag) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(d, "stat")); err == nil && zombie(stat) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// hasVar reports whether the NUL-separated environment env holds the
// entry tag exactly.
func hasVar(env, tag []byte) bool {
	for _, e := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(e, tag) {
			return true
		}
	}
	return false
}

// zombie reports whether /proc/PID/stat says the process has exited and
// waits only to be reaped.
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}
