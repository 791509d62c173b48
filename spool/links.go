package spool

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/safefile"
)

// Symbolic links inside the store. inbox never makes one, and refuses to
// write through one it finds: a thread directory, events/, tmp/ or a
// mailbox planted as a link would otherwise have it write outside the
// store. The check is an lstat of each directory a write goes into (and
// O_NOFOLLOW on event-log segments), made just before the write: it
// guards against accidents and tidy-minded tools, not against someone who
// can write the store (the trust model trusts them; see README). fsck
// reports every link and --repair removes it (the link only: its target,
// not being the store's, is left alone).

// topDirs are the store's top-level directories a command may write into.
var topDirs = []string{tmpDirName, threadsDir, eventsDir, indexDirName, locksDir, idemDir, mailboxDir, tasksDir,
	agentsDir, presenceDir, blobsDir, archiveDir, teamsDir, acksDir, sessionsDir}

// checkNoLinks refuses when any top-level directory of the store is a
// symbolic link.
func (s *Store) checkNoLinks() error {
	for _, d := range topDirs {
		if err := refuseLink(filepath.Join(s.dir, d)); err != nil {
			return err
		}
	}
	return nil
}

// refuseLink returns an error when p is a symbolic link.
func refuseLink(p string) error {
	fi, err := os.Lstat(p)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(p)
		return &inbox.Error{Code: "corrupt_store", Err: inbox.ErrFormat, Rule: p + " is a symbolic link (to " + target +
			"); inbox does not write through links inside its store (repairing the store removes it)"}
	}
	return nil
}

// plantedDir is where fsck --repair sets aside what was planted in the
// store in place of its files (FIFOs, sockets, devices); fsck does not
// look inside it.
const plantedDir = "planted"

// fsckSymlinks finds what inbox never makes anywhere in the store:
// symbolic links, and FIFOs, sockets and devices (SPEC §8). With repair
// each is set aside (plantedFinding) so that the file it stood in place
// of can be rebuilt. The intake directory is the daemon's to judge (it
// answers such a descriptor with .failed).
func (s *Store) fsckSymlinks(add func(inbox.Finding) *inbox.Finding, repair bool) {
	skip := map[string]bool{filepath.Join(s.dir, plantedDir): true, filepath.Join(s.dir, intakeDir): true}
	filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && skip[p] {
			return filepath.SkipDir
		}
		if isPlanted(d.Type()) {
			add(plantedFinding(s.dir, s.dirMode, p, d.Type(), repair))
		}
		return nil
	})
}

// plantedFinding is the finding about p, which is of type t (a link, or
// anything else but a regular file) inside the store at dir. With repair
// p is set aside: a link is removed (its target is not the store's and
// is left alone), anything else moved into planted/ (made with dirMode),
// out of the store's way.
func plantedFinding(dir string, dirMode os.FileMode, p string, t fs.FileMode, repair bool) inbox.Finding {
	if t&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(p)
		f := inbox.Finding{Check: "symlink", Path: p, Detail: "a symbolic link to " + target + " inside the store, which inbox never makes and does not write through"}
		if repair && os.Remove(p) == nil {
			f.Repaired = true
			f.Detail += "; removed (its target is untouched)"
		}
		return f
	}
	f := inbox.Finding{Check: "planted_file", Path: p, Detail: safefile.TypeName(t) +
		" inside the store, where inbox only makes regular files; it is neither read nor written"}
	if repair {
		rel, _ := filepath.Rel(dir, p)
		name := strings.ReplaceAll(rel, string(filepath.Separator), "~")
		aside := filepath.Join(dir, plantedDir, name)
		for i := 1; exists(aside); i++ {
			aside = filepath.Join(dir, plantedDir, fmt.Sprintf("%s.%d", name, i))
		}
		if os.MkdirAll(filepath.Dir(aside), dirMode) == nil && os.Rename(p, aside) == nil {
			f.Repaired = true
			f.Detail += "; set aside as " + filepath.Join(plantedDir, filepath.Base(aside))
		}
	}
	return f
}
