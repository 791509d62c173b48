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

// arm makes sure the intake watch is on the directory at the intake's
// path: a deleted directory is recreated, and one moved away and
// replaced is watched anew. On failure it names the step that failed
// ("recreate" or "watch").
func (d *daemon) arm() (step string, err error) {
	ok, err := d.watched()
	if ok {
		return "", nil
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := d.ensureIntake(); err != nil {
			return "recreate", err
		}
		d.log.Warn("intake directory was missing; recreated", "dir", d.cfg.Intake)
	case err == nil && d.iw != nil:
		d.log.Warn("intake directory was replaced; watching the new one", "dir", d.cfg.Intake)
	}
	if err := d.watchIntake(); err != nil {
		return "watch", err
	}
	return "", nil
}

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
	at(hookArm)
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
	ok, _ := d.watched()
	return !ok
}

// watched reports whether the directory at the intake's path is the one
// the intake watch is on, and the error of looking at the path.
func (d *daemon) watched() (bool, error) {
	fi, err := os.Stat(d.cfg.Intake)
	return err == nil && d.iw != nil && os.SameFile(fi, d.iwDir), err
}

// The moments a test may act at (SetHook), where a swap of the intake
// directory is hardest to notice or survive.
const (
	hookArm    = "arm"    // between identifying the intake directory and arming its watch
	hookList   = "list"   // between arming the watch and listing the directory
	hookFinish = "finish" // between a batch's renames and the fsync of their directory
)

// hook, when a test sets it, is called at each of the moments above. It
// may be called from a batch's finishing goroutine as well as Run's.
var hook func(at string)

// at calls the test's hook, if any, at moment m.
func at(m string) {
	if hook != nil {
		hook(m)
	}
}

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
