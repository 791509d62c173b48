// Package index keeps the derived lookup structure that fetch and list read:
// which threads are in which status, overall and per assignee. It is a tree
// of empty marker files,
//
//	status/<status>/<thread_id>.<priority>
//	assigned/<agent>/<status>/<thread_id>.<priority>
//
// so that a lookup lists one small directory instead of reading every
// thread. The index knows nothing of thread contents; the spool package
// keeps it in step with every mutation and can rebuild it from the thread
// headers at any time.
//
// # Guarantees
//
// Add makes a marker visible and tells the caller which directories to
// fsync for it to survive power loss. The spool adds the marker for a new
// status before it commits the status, and removes the old one after, so
// the index is always a superset of the truth: a reader must check each
// hit against the thread header (a stale marker is skipped, never trusted).
//
// # Caveats
//
// Agent names and statuses become directory names; callers validate them.
package index

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Entry is one thread as the index sees it.
type Entry struct {
	ThreadID   string
	Status     string
	AssignedTo string
	Priority   string
}

const (
	statusDir   = "status"
	assignedDir = "assigned"
)

// Index is an index directory. It holds no open files.
type Index struct {
	dir      string
	fileMode os.FileMode
	dirMode  os.FileMode
}

// Init creates the index's top-level directories.
func Init(dir string, dirMode os.FileMode) error {
	for _, d := range []string{dir, filepath.Join(dir, statusDir), filepath.Join(dir, assignedDir)} {
		if err := os.Mkdir(d, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := os.Chmod(d, dirMode); err != nil {
			return err
		}
	}
	return nil
}

// Open returns the index rooted at dir.
func Open(dir string, fileMode, dirMode os.FileMode) *Index {
	return &Index{dir: dir, fileMode: fileMode, dirMode: dirMode}
}

func marker(e Entry) string { return e.ThreadID + "." + e.Priority }

func (ix *Index) statusPath(status string) string {
	return filepath.Join(ix.dir, statusDir, status)
}

func (ix *Index) assignedPath(agent, status string) string {
	return filepath.Join(ix.dir, assignedDir, agent, status)
}

func (ix *Index) paths(e Entry) []string {
	p := []string{ix.statusPath(e.Status)}
	if e.AssignedTo != "" {
		p = append(p, ix.assignedPath(e.AssignedTo, e.Status))
	}
	return p
}

// ErrUnsafeName is returned when an entry's thread id, status or agent
// could not safely name a file or directory (empty, ".", "..", or holding a
// path separator or NUL). Callers validate names long before; this is the
// last line of defence against a tampered thread header.
var ErrUnsafeName = errors.New("index: unsafe name")

func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

func (e Entry) check() error {
	if !safeName(e.ThreadID) || !safeName(e.Status) || !safeName(e.Priority) || (e.AssignedTo != "" && !safeName(e.AssignedTo)) {
		return fmt.Errorf("%w: %q %q %q %q", ErrUnsafeName, e.ThreadID, e.Status, e.AssignedTo, e.Priority)
	}
	return nil
}

// Add creates e's markers as hard links to src (any file that outlives
// the markers, such as the thread's lock file), so that no inode is
// allocated; with src empty, or where linking fails, it creates empty
// files. It returns the directories whose fsync makes the markers durable
// (including parents of directories it had to create).
func (ix *Index) Add(e Entry, src string) (syncDirs []string, err error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	name := marker(e)
	for _, dir := range ix.paths(e) {
		created, err := ix.touch(dir, name, src)
		if err != nil {
			return nil, err
		}
		syncDirs = append(syncDirs, dir)
		syncDirs = append(syncDirs, created...)
	}
	return syncDirs, nil
}

// touch makes dir/name exist, creating dir (and its parent) if needed; it
// returns the parents of directories it created.
func (ix *Index) touch(dir, name, src string) (createdParents []string, err error) {
	p := filepath.Join(dir, name)
	err = ix.place(p, src)
	if errors.Is(err, fs.ErrNotExist) {
		createdParents, err = ix.mkdirs(dir)
		if err != nil {
			return nil, err
		}
		err = ix.place(p, src)
	}
	return createdParents, err
}

func (ix *Index) place(p, src string) error {
	if src != "" {
		err := os.Link(src, p)
		if err == nil || errors.Is(err, fs.ErrExist) {
			return nil
		}
		if errors.Is(err, fs.ErrNotExist) && exists(src) {
			return err // the directory is missing: the caller creates it
		}
		// Linking is not possible here (no source, link limit, a file
		// system without hard links): fall back to an empty file.
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, ix.fileMode)
	if err != nil {
		return err
	}
	return f.Close()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// mkdirs creates dir and any missing parents below the index root, and
// returns the parents whose entries changed.
func (ix *Index) mkdirs(dir string) ([]string, error) {
	var parents []string
	var missing []string
	for d := dir; d != ix.dir && len(d) > len(ix.dir); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, ix.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		parents = append(parents, filepath.Dir(d))
	}
	return parents, nil
}

// Remove deletes old's markers except those cur also has (when a thread's
// assignee changes but not its status, the status marker stays); missing
// markers are not an error. Removal need not be durable: a marker that
// comes back after a crash is stale and readers skip it.
func (ix *Index) Remove(old, cur Entry) error {
	if err := old.check(); err != nil {
		return err
	}
	name := marker(old)
	keep := map[string]bool{}
	for _, dir := range ix.paths(cur) {
		keep[filepath.Join(dir, marker(cur))] = true
	}
	for _, dir := range ix.paths(old) {
		p := filepath.Join(dir, name)
		if keep[p] {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Paths returns where e's markers live.
func (ix *Index) Paths(e Entry) []string {
	var out []string
	for _, dir := range ix.paths(e) {
		out = append(out, filepath.Join(dir, marker(e)))
	}
	return out
}

// Walk calls fn for every marker in the index with the entry it stands for
// (AssignedTo empty for markers of the status tree) and its path.
func (ix *Index) Walk(fn func(e Entry, path string)) error {
	statuses, err := os.ReadDir(filepath.Join(ix.dir, statusDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err // a missing tree is an empty one
	}
	for _, st := range statuses {
		es, err := ix.list(nil, ix.statusPath(st.Name()), st.Name(), "")
		if err != nil {
			return err
		}
		for _, e := range es {
			fn(e, filepath.Join(ix.statusPath(e.Status), marker(e)))
		}
	}
	agents, err := ix.Agents()
	if err != nil {
		return err
	}
	for _, a := range agents {
		statuses, err := os.ReadDir(filepath.Join(ix.dir, assignedDir, a))
		if err != nil {
			return err
		}
		for _, st := range statuses {
			es, err := ix.list(nil, ix.assignedPath(a, st.Name()), st.Name(), a)
			if err != nil {
				return err
			}
			for _, e := range es {
				fn(e, filepath.Join(ix.assignedPath(a, e.Status), marker(e)))
			}
		}
	}
	return nil
}

// ByAssignee returns the entries assigned to agent in any of statuses.
func (ix *Index) ByAssignee(agent string, statuses []string) ([]Entry, error) {
	var out []Entry
	for _, st := range statuses {
		var err error
		out, err = ix.list(out, ix.assignedPath(agent, st), st, agent)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ByStatus returns the entries in any of statuses (AssignedTo left empty).
func (ix *Index) ByStatus(statuses []string) ([]Entry, error) {
	var out []Entry
	for _, st := range statuses {
		var err error
		out, err = ix.list(out, ix.statusPath(st), st, "")
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (ix *Index) list(out []Entry, dir, status, agent string) ([]Entry, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		tid, prio, ok := strings.Cut(n, ".")
		if !ok || !safeName(tid) {
			continue
		}
		out = append(out, Entry{ThreadID: tid, Status: status, AssignedTo: agent, Priority: prio})
	}
	return out, nil
}

// Agents returns every agent that has an assignee directory.
func (ix *Index) Agents() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(ix.dir, assignedDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Reset removes every marker, leaving an empty index.
func (ix *Index) Reset() error {
	for _, sub := range []string{statusDir, assignedDir} {
		p := filepath.Join(ix.dir, sub)
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		if err := os.Mkdir(p, ix.dirMode); err != nil {
			return err
		}
	}
	return nil
}

// SortForFetch orders entries as fetch hands them out: high priority
// first, then oldest first (thread ids sort by creation time).
func SortForFetch(es []Entry) {
	rank := func(p string) int {
		switch p {
		case "high":
			return 0
		case "normal":
			return 1
		}
		return 2
	}
	slices.SortFunc(es, func(a, b Entry) int {
		if d := rank(a.Priority) - rank(b.Priority); d != 0 {
			return d
		}
		return strings.Compare(a.ThreadID, b.ThreadID)
	})
}

// SortNewestFirst orders entries by creation time, newest first.
func SortNewestFirst(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(b.ThreadID, a.ThreadID) })
}
