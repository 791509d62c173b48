//go:build unix

package queue

import (
	"fmt"
	"syscall"
)

// startUmask is the umask this process started with: the user's, before
// a group-shared store set the process's own to 007 (package spool), which
// tasks must not inherit. Package initialisation runs before any store is
// opened and before anything else could create a file, so the moment the
// umask is changed to read it harms nothing.
var startUmask = func() int {
	old := syscall.Umask(0o077)
	syscall.Umask(old)
	return old
}()

// StartUmask is, in octal ("0022"), the umask this process started with:
// what the tasks it runs start with unless Config.Umask says otherwise.
func StartUmask() string { return fmt.Sprintf("%04o", startUmask) }
