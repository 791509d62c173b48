package watcher

import "syscall"

// statKey returns a file's size and modification time in nanoseconds with
// one stat(2) and no allocation.
func statKey(p string) (size, mtime int64, ok bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, 0, false
	}
	return st.Size, st.Mtim.Nano(), true
}
