package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox/internal/durable"
	"github.com/inbox-dev/inbox/watcher"
)

// watchIntake (re)arms the watch on the intake directory, remembering
// which directory it is: one moved away and replaced must be watched anew.
// The directory is identified before the watch is armed: if it is
// replaced in between, the watch may be on the new one while the daemon
// remembers the old, which only costs one more re-arm when the parent's
// watch reports the swap; the other order could remember the new
// directory while watching the old, and never notice.
func (d *daemon) watchIntake() error {
	if d.iw != nil {
		d.iw.Close()
		d.iw = nil
	}
	var err error
	if d.iwDir, err = os.Stat(d.cfg.Intake); err != nil {
		return err
	}
	if armHook != nil {
		armHook()
	}
	d.iw, err = d.watch(d.cfg.Intake)
	return err
}

// watchParent arms the watch on the intake's parent directory, unless
// the daemon polls (a poll of the intake looks at whatever directory is
// at its path, so it notices a swap by itself) or notifications are not
// to be had for the parent: then the sweep is the safety net.
func (d *daemon) watchParent() {
	if d.cfg.ForcePoll {
		return
	}
	w, err := watcher.New(filepath.Dir(d.cfg.Intake), watcher.Options{})
	if err != nil {
		return
	}
	if w.Fallback() != nil {
		w.Close()
		return
	}
	d.pw = w
}

// intakeC is the intake watch's channel; nil (never ready) while there
// is none (arming it failed: the next sweep tries again).
func (d *daemon) intakeC() <-chan struct{} {
	if d.iw == nil {
		return nil
	}
	return d.iw.C
}

// parentC is the parent watch's channel; nil (never ready) without one.
func (d *daemon) parentC() <-chan struct{} {
	if d.pw == nil {
		return nil
	}
	return d.pw.C
}

// replaced reports whether the intake directory at its path is not the
// one the daemon watches: moved away, deleted or replaced.
func (d *daemon) replaced() bool {
	fi, err := os.Stat(d.cfg.Intake)
	return err != nil || d.iw == nil || !os.SameFile(fi, d.iwDir)
}

// armHook, when a test sets it, runs between identifying the intake
// directory and arming its watch, where a swap is hardest to notice.
var armHook func()

func (d *daemon) watch(dir string) (*watcher.Watcher, error) {
	w, err := watcher.New(dir, watcher.Options{ForcePoll: d.cfg.ForcePoll})
	if err != nil {
		return nil, err
	}
	if r := w.Fallback(); r != nil {
		d.log.Warn("file notifications unavailable; polling every 100ms", "dir", dir, "reason", r)
	}
	return w, nil
}

// ensureIntake creates the intake directory (0700) if it is missing.
func (d *daemon) ensureIntake() error {
	fi, err := os.Stat(d.cfg.Intake)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("intake %s is not a directory", d.cfg.Intake)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(d.cfg.Intake, 0o700); err != nil {
		return fmt.Errorf("create intake directory: %w", err)
	}
	if err := os.Chmod(d.cfg.Intake, 0o700); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(d.cfg.Intake))
}
