package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
)

// Files planted where fsck --repair must read or lock before it can
// repair anything (SPEC §8): the store's lock files, which it takes all
// of, and inbox.json, which Open reads first (Options.Recover opens a
// store without it). fsckSymlinks reports them with every other planted
// file; a repair sets these aside first (setAsideFirst), as it would any
// other, so that it can go on.

// isPlanted is a special file: what fsckSymlinks reports and
// plantedFinding sets aside (a directory is none).
func isPlanted(t fs.FileMode) bool {
	return t&(fs.ModeSymlink|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0
}

// notAStoreFile is the refusal of a planted file (plantedErr).
func notAStoreFile(err error) bool {
	var e *inbox.Error
	return errors.As(err, &e) && e.Code == "not_a_store_file"
}

// setAsideFirst sets aside, for a repair, what was planted in place of
// inbox.json (writing it anew) and of locks/ or a lock file in it (where
// writers refuse to take a lock, safeopen.go), so that the repair can
// take every lock, and returns its findings.
func (s *Store) setAsideFirst() []inbox.Finding {
	var out []inbox.Finding
	if f, ok := s.restorePlantedFormat(); ok {
		out = append(out, f)
	}
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

// shownFormat is inbox.json as the rest of the store at dir shows it,
// when what stands in its place cannot be read (Options.Recover): the
// format version durable.json proves (version 1 stores had none), shared
// when the store's directory is open to its group (0770, Init). When it
// was made and its max_blob are filled in by restorePlantedFormat.
func shownFormat(dir string) *formatInfo {
	info := &formatInfo{Format: formatName, Version: 1, MaxBlob: inbox.DefaultMaxBlob}
	if fi, err := os.Lstat(filepath.Join(dir, durableFile)); err == nil && fi.Mode().IsRegular() {
		info.Version = FormatVersion
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o070 != 0 {
		info.Shared = true
	}
	return info
}

// restorePlantedFormat sets aside what was planted in place of
// inbox.json and writes inbox.json anew: as this Store read it when it
// opened, else as the store shows it (shownFormat), made when its first
// event was, and taking at least the largest blob it holds. The target
// of a link is never read. ok is false when inbox.json is no planted
// file.
func (s *Store) restorePlantedFormat() (f inbox.Finding, ok bool) {
	p := filepath.Join(s.dir, formatFile)
	fi, err := os.Lstat(p)
	if err != nil || !isPlanted(fi.Mode().Type()) {
		return f, false
	}
	f = plantedFinding(s.dir, s.dirMode, p, fi.Mode().Type(), true)
	if !f.Repaired {
		return f, true
	}
	info := s.format
	how := "as this process read it when it opened the store"
	if s.formatProven {
		info.CreatedAt, info.MaxBlob = s.shownCreation(), max(info.MaxBlob, s.largestBlob())
		shared := "not shared"
		if info.Shared {
			shared = "group-shared (its directory is open to the group)"
		}
		how = fmt.Sprintf("from what the store shows: format version %d, %s, made %s, max_blob %s (inbox init --max-blob SIZE sets another)",
			info.Version, shared, info.CreatedAt, inbox.FormatSize(info.MaxBlob))
	}
	if err := writeFormat(s.dir, s.fileMode, &info); err != nil {
		f.Repaired = false
		f.Detail += "; inbox.json could not be written anew: " + err.Error()
		return f, true
	}
	s.format, s.formatProven = info, false
	f.Detail += "; inbox.json written anew " + how
	return f, true
}

// shownCreation is when the store was made as far as it shows: the time
// of the first event its log holds, else now.
func (s *Store) shownCreation() string {
	created := ""
	s.log.scan(Pos{}, func(ev *logEvent, _ Pos) bool {
		created = ev.CreatedAt
		return created == ""
	})
	if created == "" {
		created = inbox.FormatTime(s.now())
	}
	return created
}

// largestBlob is the size of the largest blob the store holds (0: none).
func (s *Store) largestBlob() int64 {
	var n int64
	entries, _ := os.ReadDir(filepath.Join(s.dir, blobsDir))
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n = max(n, fi.Size())
		}
	}
	return n
}
