//go:build unix

package spool

import "syscall"

// shareUmask makes the process create group-writable files: a group-shared
// store promises 0660 files and 0770 directories to every member, whatever
// the umask of the process that happens to create them. It changes the
// umask of the whole process, which is what a command working on a shared
// store wants.
func shareUmask() { syscall.Umask(0o007) }
