package spool

import (
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/inbox-dev/inbox/internal/safefile"
)

// staleTempAge is how long a temp file in tmp/ must have gone unwritten
// before a sweep takes its writer for dead. A live writer's file changes
// as it writes (a body streamed in, a blob staged), and the small records
// renamed into place live for microseconds; a writer that is stopped and
// later resumes only finds its rename refused, with nothing acknowledged.
const staleTempAge = time.Minute

// sweepTemps removes the temp files in tmp/ whose writers died (SPEC §8):
// those not written for staleTempAge and not flocked by anyone (a writer
// that holds a lock on its temp file keeps it however long it pauses).
// It returns how many it removed. fsck --repair, which holds every lock,
// removes them all.
func (s *Store) sweepTemps(now time.Time) int {
	entries, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < staleTempAge {
			continue
		}
		p := filepath.Join(s.tmpDir(), e.Name())
		if fi.Mode().IsRegular() {
			f, err := safefile.OpenFile(p, os.O_RDONLY, 0)
			if err != nil {
				continue
			}
			locked := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
			if !locked {
				// Removed while this lock is held: a writer that takes
				// its lock now finds the file gone, never half-swept.
				if os.Remove(p) == nil {
					n++
				}
			}
			f.Close()
			continue
		}
		if os.RemoveAll(p) == nil {
			n++
		}
	}
	return n
}
