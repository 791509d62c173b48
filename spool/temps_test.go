package spool

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

// TestSweepTemps: the daemon's checkpoint removes the temp files of dead
// writers (unwritten for a minute, unlocked) and keeps a fresh one and an
// old one whose writer holds its lock.
func TestSweepTemps(t *testing.T) {
	s, db := openTemp(t)
	old := time.Now().Add(-2 * staleTempAge)
	mk := func(name string, mtime time.Time) string {
		p := filepath.Join(db, tmpDirName, name)
		if err := os.WriteFile(p, make([]byte, 1<<16), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dead := mk("body-dead", old)
	fresh := mk("body-fresh", time.Now())
	held := mk("body-held", old)
	lk := flock.New(held)
	if ok, err := lk.TryLock(); err != nil || !ok {
		t.Fatalf("lock %s: %v", held, err)
	}
	defer lk.Unlock()
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if exists(dead) {
		t.Errorf("%s: a dead writer's temp file survived the sweep", dead)
	}
	if !exists(fresh) || !exists(held) {
		t.Errorf("a live writer's temp file was swept (fresh %v, locked %v)", exists(fresh), exists(held))
	}
}
