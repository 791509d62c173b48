package spool

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// Files planted where fsck --repair must read or lock before it can
// repair anything (SPEC §8): the store's lock files, which it takes all
// of, and inbox.json, which Open reads first. fsckSymlinks reports them
// with every other planted file; the repair sets these aside first, as
// it would any other, and so can go on (Fsck).

// isPlanted is a special file: what fsckSymlinks reports and
// plantedFinding sets aside (a directory is none).
func isPlanted(t fs.FileMode) bool {
	return t&(fs.ModeSymlink|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0
}

// setAsidePlantedLocks sets aside, for a repair, what was planted in
// place of locks/ or of a lock file in it (where writers refuse to take
// a lock, safeopen.go), so that the repair can take every lock, and
// returns its findings (already repaired).
func (s *Store) setAsidePlantedLocks() []inbox.Finding {
	var out []inbox.Finding
	dir := filepath.Join(s.dir, locksDir)
	fi, err := os.Lstat(dir)
	if err == nil && isPlanted(fi.Mode().Type()) {
		out = append(out, plantedFinding(s.dir, s.dirMode, dir, fi.Mode().Type(), true))
		os.Mkdir(dir, s.dirMode)
		return out
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if isPlanted(e.Type()) {
			out = append(out, plantedFinding(s.dir, s.dirMode, filepath.Join(dir, e.Name()), e.Type(), true))
		}
	}
	return out
}
