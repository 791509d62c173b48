// Package index keeps the derived lookup structure that fetch and list read:
// which threads are in which status, overall and per assignee. It is a tree
// of empty marker files,
//
//	status/<status>/<thread_id>.<priority>
//	assigned/<agent>/<status>/<thread_id>.<priority>
//
// (a thread assigned to no one but offered to several agents has a marker
// in each one's tree),
// so that a lookup lists one small directory instead of reading every
// thread. The index knows nothing of thread contents; the spool package
// keeps it in step with every mutation and can rebuild it from the thread
// headers at any time.
//
// # Time buckets
//
// The statuses a Layout names keep their markers in time buckets taken
// from the thread id, whose first characters after the "_" are its
// creation time in base32 milliseconds:
//
//	status/done/<id[0:5]>/<id[5:7]>/<id[7]>/<thread_id>.<priority>
//
// (buckets of about 9 hours, 33 seconds and 1 second), so that Newest
// reads only the newest buckets to answer "the 20 newest done threads" in
// a store of any size. A bucket emptied by a removal is deleted; an Add
// racing with that deletion recreates it. A status that an agent's fetch
// reads in full stays flat in the assignee trees.
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
// A directory another process created but had not yet fsynced when it was
// killed can lose a marker added to it later on power loss; fsck finds the
// thread missing from the index and --repair restores it.
package index

import (
	"errors"
	"fmt"
	"github.com/inbox-dev/inbox/internal/durable"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Entry is one thread as the index sees it.
type Entry struct {
	ThreadID   string
	Status     string
	AssignedTo string
	Priority   string
	// Offered, for a thread assigned to no one, are the agents whose
	// trees list it too (a thread sent to several agents or a team).
	Offered []string
}

const (
	statusDir   = "status"
	assignedDir = "assigned"
)

// shardDepth is the number of bucket levels under a sharded status.
const shardDepth = 3

// Index is an index directory. It holds no open files.
type Index struct {
	dir      string
	fileMode os.FileMode
	dirMode  os.FileMode
	sharded  map[string]bool // in the status tree
	shardedA map[string]bool // in the assignee trees
}

// ErrMissing is returned by the readers when the index cannot be trusted
// to be complete: its status or assigned tree is gone (someone deleted
// index/), or a rebuild did not finish. An empty answer from such an index
// would read as "no work" while work waits, so the readers refuse; Rebuild
// (inbox reindex) makes it whole again.
var ErrMissing = errors.New("index missing or incomplete")

// rebuildingFile exists while a rebuild runs, and after one that was
// interrupted.
const rebuildingFile = "REBUILDING"

// Check reports ErrMissing when the index is not whole.
func (ix *Index) Check() error {
	if err := ix.checkRebuilt(); err != nil {
		return err
	}
	for _, d := range []string{statusDir, assignedDir} {
		fi, err := os.Stat(filepath.Join(ix.dir, d))
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: %s is gone", ErrMissing, filepath.Join(filepath.Base(ix.dir), d))
		}
	}
	return nil
}

// checkRebuilt reports ErrMissing while a rebuild is unfinished. Readers
// check it on every call (one failed lookup); the roots they check only
// when they found nothing, the one answer a deleted index gives.
func (ix *Index) checkRebuilt() error {
	if _, err := os.Lstat(filepath.Join(ix.dir, rebuildingFile)); err == nil {
		return fmt.Errorf("%w: a rebuild of %s did not finish", ErrMissing, filepath.Base(ix.dir))
	}
	return nil
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

// Layout names the statuses whose markers are kept in time buckets (see
// the package comment), in the status tree and in the assignee trees. It
// is part of the on-disk format: every opener must give the same one.
type Layout struct {
	Sharded         []string
	ShardedAssigned []string // a subset of Sharded
}

// Open returns the index rooted at dir.
func Open(dir string, fileMode, dirMode os.FileMode, l Layout) *Index {
	ix := &Index{dir: dir, fileMode: fileMode, dirMode: dirMode, sharded: map[string]bool{}, shardedA: map[string]bool{}}
	for _, st := range l.Sharded {
		ix.sharded[st] = true
	}
	for _, st := range l.ShardedAssigned {
		ix.shardedA[st] = true
		ix.sharded[st] = true
	}
	return ix
}

// isSharded reports whether status's markers in agent's tree (the status
// tree when agent is empty) are kept in buckets.
func (ix *Index) isSharded(agent, status string) bool {
	if agent == "" {
		return ix.sharded[status]
	}
	return ix.shardedA[status]
}

func marker(e Entry) string { return e.ThreadID + "." + e.Priority }

// bucket returns the bucket directories of a thread id (relative), or
// false when the id does not start with at least 8 base32 characters after
// its prefix.
func bucket(tid string) (string, bool) {
	id := tid[strings.IndexByte(tid, '_')+1:]
	if len(id) < 8 {
		return "", false
	}
	for _, c := range []byte(id[:8]) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return "", false
		}
	}
	return filepath.Join(id[0:5], id[5:7], id[7:8]), true
}

// statusBase is the directory holding status's markers (or, when sharded,
// its buckets) for agent's tree, or the status tree when agent is empty.
func (ix *Index) statusBase(agent, status string) string {
	if agent == "" {
		return filepath.Join(ix.dir, statusDir, status)
	}
	return filepath.Join(ix.dir, assignedDir, agent, status)
}

// dirOf is the directory holding e's marker in agent's tree.
func (ix *Index) dirOf(agent string, e Entry) string {
	d := ix.statusBase(agent, e.Status)
	if ix.isSharded(agent, e.Status) {
		b, _ := bucket(e.ThreadID) // check has vouched for the id
		d = filepath.Join(d, b)
	}
	return d
}

func (ix *Index) dirs(e Entry) []string {
	p := []string{ix.dirOf("", e)}
	if e.AssignedTo != "" {
		p = append(p, ix.dirOf(e.AssignedTo, e))
	} else {
		for _, a := range e.Offered {
			p = append(p, ix.dirOf(a, e))
		}
	}
	return p
}

// ErrUnsafeName is returned when an entry's thread id, status or agent
// could not safely name a file or directory (empty, ".", "..", or holding a
// path separator or NUL), or when the thread id of a sharded status does
// not carry its creation time. Callers validate names long before; this is
// the last line of defence against a tampered thread header.
var ErrUnsafeName = errors.New("index: unsafe name")

func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

func (e Entry) check(ix *Index) error {
	ok := safeName(e.ThreadID) && safeName(e.Status) && safeName(e.Priority) && (e.AssignedTo == "" || safeName(e.AssignedTo))
	for _, a := range e.Offered {
		ok = ok && safeName(a)
	}
	if ok && ix.sharded[e.Status] {
		_, ok = bucket(e.ThreadID)
	}
	if !ok {
		return fmt.Errorf("%w: %q %q %q %q", ErrUnsafeName, e.ThreadID, e.Status, e.AssignedTo, e.Priority)
	}
	return nil
}

// Add creates e's markers as hard links to src (any file that outlives
// the markers, such as the thread's first message), so that no inode is
// allocated; with src empty, or where linking fails, it creates empty
// files. It returns the directories whose fsync makes the markers durable
// (including parents of directories it had to create).
//
// When the index's roots are gone (see ErrMissing), Add adds nothing and
// succeeds: recreating them would make an index holding only this marker
// look whole; readers refuse until the index is rebuilt.
func (ix *Index) Add(e Entry, src string) (syncDirs []string, err error) {
	if err := e.check(ix); err != nil {
		return nil, err
	}
	name := marker(e)
	for _, dir := range ix.dirs(e) {
		created, err := ix.touch(dir, name, src)
		if errors.Is(err, ErrMissing) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		syncDirs = append(syncDirs, dir)
		syncDirs = append(syncDirs, created...)
	}
	return syncDirs, nil
}

// touch makes dir/name exist, creating dir (and its parents) if needed; it
// returns the parents of directories it created.
func (ix *Index) touch(dir, name, src string) (createdParents []string, err error) {
	p := filepath.Join(dir, name)
	for attempt := 0; ; attempt++ {
		err = ix.place(p, src)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt == 64 {
			return createdParents, err
		}
		// The directory is missing, or is an emptied bucket another
		// process has just deleted: (re)create it and try again.
		parents, err := ix.mkdirs(dir)
		createdParents = append(createdParents, parents...)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
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
// returns the parents whose entries changed. A parent deleted under it
// (an emptied bucket) makes it return fs.ErrNotExist: the caller retries.
func (ix *Index) mkdirs(dir string) ([]string, error) {
	var parents []string
	var missing []string
	for d := dir; d != ix.dir && len(d) > len(ix.dir); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		if p := filepath.Dir(d); p == ix.dir {
			return nil, fmt.Errorf("%w: %s is gone", ErrMissing, d) // a root
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := os.Mkdir(d, ix.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return parents, err
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
	if err := old.check(ix); err != nil {
		return err
	}
	name := marker(old)
	keep := map[string]bool{}
	if cur.check(ix) == nil {
		for _, dir := range ix.dirs(cur) {
			keep[filepath.Join(dir, marker(cur))] = true
		}
	}
	for _, dir := range ix.dirs(old) {
		p := filepath.Join(dir, name)
		if keep[p] {
			continue
		}
		if err := ix.RemoveMarker(old, p); err != nil {
			return err
		}
	}
	return nil
}

// RemoveMarker deletes the marker at path (as Walk reported it for e), and
// the buckets above it that this leaves empty. A missing marker is not an
// error.
func (ix *Index) RemoveMarker(e Entry, path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	agent := ""
	base := ix.statusBase("", e.Status)
	if !strings.HasPrefix(path, base+string(filepath.Separator)) {
		agent = e.AssignedTo
		base = ix.statusBase(agent, e.Status)
	}
	if !ix.isSharded(agent, e.Status) {
		return nil
	}
	// rmdir refuses a bucket another process has just filled; one it is
	// about to fill, its Add recreates.
	for d := filepath.Dir(path); len(d) > len(base) && strings.HasPrefix(d, base); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
	return nil
}

// Paths returns where e's markers live.
func (ix *Index) Paths(e Entry) []string {
	if e.check(ix) != nil {
		return nil
	}
	var out []string
	for _, dir := range ix.dirs(e) {
		out = append(out, filepath.Join(dir, marker(e)))
	}
	return out
}

// located is an entry and the path of its marker.
type located struct {
	e    Entry
	path string
}

// walker yields the markers of one status of one tree in descending
// thread id order (newest first), reading one leaf directory at a time.
type walker struct {
	ix            *Index
	status, agent string
	frames        []frame
	buf           []located // the current leaf, ascending: the next is last
	err           error
}

// frame is one level of the descent: its directories still to read,
// ascending (the next is last).
type frame struct {
	depth int
	dirs  []string
}

func (ix *Index) walk(agent, status string) *walker {
	depth := shardDepth
	if !ix.isSharded(agent, status) {
		depth = 0
	}
	// The frame's depth counts the bucket levels still below its dirs.
	return &walker{ix: ix, status: status, agent: agent,
		frames: []frame{{depth: depth, dirs: []string{ix.statusBase(agent, status)}}}}
}

// head returns the next marker without consuming it.
func (w *walker) head() (located, bool) {
	for len(w.buf) == 0 {
		if !w.fill() {
			return located{}, false
		}
	}
	return w.buf[len(w.buf)-1], true
}

func (w *walker) pop() { w.buf = w.buf[:len(w.buf)-1] }

// fill reads the next non-empty leaf into buf.
func (w *walker) fill() bool {
	for len(w.frames) > 0 && w.err == nil {
		f := &w.frames[len(w.frames)-1]
		if len(f.dirs) == 0 {
			w.frames = w.frames[:len(w.frames)-1]
			continue
		}
		d, depth := f.dirs[len(f.dirs)-1], f.depth
		f.dirs = f.dirs[:len(f.dirs)-1]
		names, err := readNames(d)
		if err != nil {
			w.err = err
			return false
		}
		slices.Sort(names)
		var sub []string
		for _, n := range names {
			tid, prio, ok := strings.Cut(n, ".")
			switch {
			case ok && safeName(tid):
				// A marker; above the leaves it is out of place, and is
				// still reported so that fsck can find and remove it.
				w.buf = append(w.buf, located{Entry{ThreadID: tid, Status: w.status, AssignedTo: w.agent, Priority: prio}, filepath.Join(d, n)})
			case depth > 0 && !ok && safeName(n):
				sub = append(sub, filepath.Join(d, n))
			}
		}
		if depth > 0 {
			w.frames = append(w.frames, frame{depth: depth - 1, dirs: sub})
		}
		if len(w.buf) > 0 {
			return true
		}
	}
	return false
}

// readNames lists a directory; a missing one is empty.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, nil // a stray file where a bucket belongs holds no markers
	}
	return names, err
}

// Newest calls fn with the entries of statuses in agent's tree (the status
// tree when agent is empty), newest thread first, until fn returns false.
// A thread with markers in two statuses comes twice, back to back. Sharded
// statuses are read one bucket at a time, so a caller that stops early
// reads only the newest buckets.
func (ix *Index) Newest(agent string, statuses []string, fn func(Entry) bool) error {
	if err := ix.checkRebuilt(); err != nil {
		return err
	}
	found := false
	var ws []*walker
	for _, st := range statuses {
		if !safeName(st) {
			return fmt.Errorf("%w: status %q", ErrUnsafeName, st)
		}
		ws = append(ws, ix.walk(agent, st))
	}
	for {
		var best *walker
		var top located
		for _, w := range ws {
			h, ok := w.head()
			if w.err != nil {
				return w.err
			}
			if ok && (best == nil || h.e.ThreadID > top.e.ThreadID) {
				best, top = w, h
			}
		}
		if best == nil {
			if !found {
				return ix.Check()
			}
			return nil
		}
		best.pop()
		found = true
		if !fn(top.e) {
			return nil
		}
	}
}

// all drains walkers for statuses of agent's tree in any order.
func (ix *Index) all(agent string, statuses []string, fn func(located)) error {
	for _, st := range statuses {
		if !safeName(st) {
			return fmt.Errorf("%w: status %q", ErrUnsafeName, st)
		}
		w := ix.walk(agent, st)
		for {
			l, ok := w.head()
			if w.err != nil {
				return w.err
			}
			if !ok {
				break
			}
			w.pop()
			fn(l)
		}
	}
	return nil
}

// Walk calls fn for every marker in the index with the entry it stands for
// (AssignedTo empty for markers of the status tree) and its path.
func (ix *Index) Walk(fn func(e Entry, path string)) error {
	visit := func(l located) { fn(l.e, l.path) }
	statuses, err := readNames(filepath.Join(ix.dir, statusDir))
	if err != nil {
		return err
	}
	if err := ix.all("", statuses, visit); err != nil {
		return err
	}
	agents, err := ix.listAgents()
	if err != nil {
		return err
	}
	for _, a := range agents {
		statuses, err := readNames(filepath.Join(ix.dir, assignedDir, a))
		if err != nil {
			return err
		}
		if err := ix.all(a, statuses, visit); err != nil {
			return err
		}
	}
	return nil
}

// ByAssignee returns the entries assigned to agent in any of statuses.
func (ix *Index) ByAssignee(agent string, statuses []string) ([]Entry, error) {
	return ix.collect(agent, statuses)
}

// ByStatus returns the entries in any of statuses (AssignedTo left empty).
func (ix *Index) ByStatus(statuses []string) ([]Entry, error) {
	return ix.collect("", statuses)
}

// collect returns the entries of statuses in agent's tree; it refuses
// (ErrMissing) to answer from an index that is not whole.
func (ix *Index) collect(agent string, statuses []string) ([]Entry, error) {
	if err := ix.checkRebuilt(); err != nil {
		return nil, err
	}
	var out []Entry
	if err := ix.all(agent, statuses, func(l located) { out = append(out, l.e) }); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, ix.Check()
	}
	return out, nil
}

// Agents returns every agent that has an assignee directory.
func (ix *Index) Agents() ([]string, error) {
	if err := ix.checkRebuilt(); err != nil {
		return nil, err
	}
	if err := ix.Check(); err != nil {
		return nil, err
	}
	return ix.listAgents()
}

// listAgents lists the assignee directories, none when the tree is gone.
func (ix *Index) listAgents() ([]string, error) {
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

// Reset starts a rebuild: it marks the index as being rebuilt (readers
// refuse it until Rebuilt) and removes every marker, recreating the index
// directory itself if it is gone. The caller adds every entry, fsyncs the
// directories Add named, then calls Rebuilt.
func (ix *Index) Reset() error {
	if err := os.MkdirAll(ix.dir, ix.dirMode); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(ix.dir, rebuildingFile), os.O_CREATE|os.O_WRONLY, ix.fileMode)
	if err != nil {
		return err
	}
	f.Close()
	if err := durable.SyncDir(ix.dir); err != nil {
		return err
	}
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

// Rebuilt ends a rebuild Reset started: the index is whole again.
func (ix *Index) Rebuilt() error {
	if err := os.Remove(filepath.Join(ix.dir, rebuildingFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return durable.SyncDir(ix.dir)
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
