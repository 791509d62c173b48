//go:build !unix

package spool

// shareUmask is a no-op where there is no umask.
func shareUmask() {}
