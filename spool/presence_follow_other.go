//go:build !linux

package spool

import "context"

// presenceNotifier follows presence with inotify, on Linux only.
type presenceNotifier struct{}

func (s *Store) notifyPresence() (*presenceNotifier, error) { return nil, errNoInotify }

func (n *presenceNotifier) run(ctx context.Context, fn func()) error { return nil }
