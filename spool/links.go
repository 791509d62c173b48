package spool

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/inbox-dev/inbox"
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

// fsckLinks finds symbolic links anywhere in the store.
func (s *Store) fsckSymlinks(add func(inbox.Finding) *inbox.Finding, repair bool) {
	filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, _ := os.Readlink(p)
		f := add(inbox.Finding{Check: "symlink", Path: p, Detail: "a symbolic link to " + target + " inside the store, which inbox never makes and does not write through"})
		if repair {
			f.Repaired = os.Remove(p) == nil
			if f.Repaired {
				f.Detail += "; removed (its target is untouched)"
			}
		}
		return nil
	})
}
