//go:build !linux

package watcher

// handOff is only needed where closing a watch delays process exit (Linux).
func handOff() {}
