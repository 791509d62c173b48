//go:build !unix

package queue

// StartUmask is empty where there is no umask.
func StartUmask() string { return "" }
