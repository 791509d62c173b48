package index_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/inbox-dev/inbox/index"
)

func ids(es []index.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ThreadID)
	}
	return out
}

func TestAddMoveRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	if err := index.Init(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ix := index.Open(dir, 0o600, 0o700, index.Layout{})
	src := filepath.Join(t.TempDir(), "m-1")
	os.WriteFile(src, []byte("{}"), 0o600)

	a := index.Entry{ThreadID: "thr_a", Status: "pending", AssignedTo: "X", Priority: "normal"}
	b := index.Entry{ThreadID: "thr_b", Status: "pending", AssignedTo: "X", Priority: "high"}
	c := index.Entry{ThreadID: "thr_c", Status: "pending", AssignedTo: "Y", Priority: "low"}
	for _, e := range []index.Entry{a, b, c} {
		dirs, err := ix.Add(e, src)
		if err != nil || len(dirs) == 0 {
			t.Fatalf("Add %v: dirs %v err %v", e, dirs, err)
		}
	}
	got, _ := ix.ByAssignee("X", []string{"pending"})
	index.SortForFetch(got)
	if want := []string{"thr_b", "thr_a"}; !slices.Equal(ids(got), want) {
		t.Fatalf("X pending, fetch order: %v, want %v", ids(got), want)
	}
	all, _ := ix.ByStatus([]string{"pending"})
	index.SortNewestFirst(all)
	if want := []string{"thr_c", "thr_b", "thr_a"}; !slices.Equal(ids(all), want) {
		t.Fatalf("pending, newest first: %v, want %v", ids(all), want)
	}
	// A claimed by Z: same status change for a, assignee change.
	a2 := a
	a2.Status, a2.AssignedTo = "claimed", "Z"
	ix.Add(a2, src)
	if err := ix.Remove(a, a2); err != nil {
		t.Fatal(err)
	}
	if got, _ := ix.ByAssignee("X", []string{"pending"}); slices.Contains(ids(got), "thr_a") {
		t.Fatal("old marker left behind")
	}
	if got, _ := ix.ByAssignee("Z", []string{"claimed"}); !slices.Equal(ids(got), []string{"thr_a"}) {
		t.Fatalf("Z claimed: %v", ids(got))
	}
	// Only the assignee changes: the status marker must stay.
	a3 := a2
	a3.AssignedTo = "W"
	ix.Add(a3, src)
	ix.Remove(a2, a3)
	if got, _ := ix.ByStatus([]string{"claimed"}); !slices.Equal(ids(got), []string{"thr_a"}) {
		t.Fatalf("status marker lost when only the assignee changed: %v", ids(got))
	}
	// Markers are hard links to src: no inode of their own.
	fi, _ := os.Stat(src)
	ms, _ := filepath.Glob(filepath.Join(dir, "status", "claimed", "*"))
	mi, _ := os.Stat(ms[0])
	if !os.SameFile(fi, mi) {
		t.Fatal("marker is not a link to its source")
	}
	agents, _ := ix.Agents()
	slices.Sort(agents)
	if !slices.Equal(agents, []string{"W", "X", "Y", "Z"}) {
		t.Fatalf("agents %v", agents)
	}
	if err := ix.Reset(); err != nil {
		t.Fatal(err)
	}
	if got, _ := ix.ByStatus([]string{"pending", "claimed"}); len(got) != 0 {
		t.Fatalf("after Reset: %v", ids(got))
	}
}

// tid makes a thread id whose creation-time characters are t (8 base32
// characters: the three bucket levels) and whose tail is n.
func tid(t string, n int) string {
	return fmt.Sprintf("thr_%s00%016d", t, n)
}

func newSharded(t *testing.T) (*index.Index, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "index")
	if err := index.Init(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return index.Open(dir, 0o600, 0o700, index.Layout{Sharded: []string{"pending"}, ShardedAssigned: []string{"done", "failed"}}), dir
}

func newest(t *testing.T, ix *index.Index, agent string, statuses []string, limit int) []string {
	t.Helper()
	var out []string
	err := ix.Newest(agent, statuses, func(e index.Entry) bool {
		out = append(out, e.ThreadID)
		return len(out) < limit
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestShardedLayoutAndNewest(t *testing.T) {
	ix, dir := newSharded(t)
	// Ids in creation order, spread over every bucket level.
	times := []string{"0000a000", "0000a001", "0000a0z0", "0000b000", "0000b001", "0001a000", "1000a000"}
	var all []string
	for i, tm := range times {
		st := []string{"done", "failed", "pending"}[i%3]
		e := index.Entry{ThreadID: tid(tm, i), Status: st, AssignedTo: "X", Priority: "normal"}
		if _, err := ix.Add(e, ""); err != nil {
			t.Fatal(err)
		}
		all = append(all, e.ThreadID)
	}
	slices.Reverse(all)
	statuses := []string{"pending", "done", "failed"}
	if got := newest(t, ix, "", statuses, 100); !slices.Equal(got, all) {
		t.Fatalf("status tree newest first:\n got %v\nwant %v", got, all)
	}
	if got := newest(t, ix, "X", statuses, 3); !slices.Equal(got, all[:3]) {
		t.Fatalf("X's tree, first 3: %v, want %v", got, all[:3])
	}
	// A done marker sits in its time buckets, in both trees.
	for _, p := range []string{
		filepath.Join(dir, "status", "done", "0000a", "00", "0", tid("0000a000", 0)+".normal"),
		filepath.Join(dir, "assigned", "X", "done", "0000a", "00", "0", tid("0000a000", 0)+".normal"),
		filepath.Join(dir, "status", "pending", "0000a", "0z", "0", tid("0000a0z0", 2)+".normal"),
		filepath.Join(dir, "assigned", "X", "pending", tid("0000a0z0", 2)+".normal"),
	} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("marker not where the layout puts it: %v", err)
		}
	}
	// An id without a creation time cannot be placed in a sharded status.
	if _, err := ix.Add(index.Entry{ThreadID: "thr_x", Status: "done", Priority: "normal"}, ""); !errors.Is(err, index.ErrUnsafeName) {
		t.Fatalf("Add of an id without time: %v, want ErrUnsafeName", err)
	}
}

func TestShardedRemovePrunesBuckets(t *testing.T) {
	ix, dir := newSharded(t)
	a := index.Entry{ThreadID: tid("0000a000", 1), Status: "done", AssignedTo: "X", Priority: "normal"}
	b := index.Entry{ThreadID: tid("0000a000", 2), Status: "done", AssignedTo: "X", Priority: "normal"}
	for _, e := range []index.Entry{a, b} {
		if _, err := ix.Add(e, ""); err != nil {
			t.Fatal(err)
		}
	}
	leaf := filepath.Join(dir, "status", "done", "0000a", "00", "0")
	ix.Remove(a, index.Entry{})
	if _, err := os.Stat(leaf); err != nil {
		t.Fatalf("a bucket still holding a marker was removed: %v", err)
	}
	ix.Remove(b, index.Entry{})
	for _, d := range []string{leaf, filepath.Join(dir, "status", "done", "0000a"), filepath.Join(dir, "assigned", "X", "done", "0000a")} {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("emptied bucket %s left behind: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "status", "done")); err != nil {
		t.Fatalf("pruning went above the buckets: %v", err)
	}
}

// TestNewestReadsOnlyNewestBuckets: a caller that stops early never opens
// older buckets (here an old bucket is made unreadable: a symlink loop).
func TestNewestReadsOnlyNewestBuckets(t *testing.T) {
	ix, dir := newSharded(t)
	old := index.Entry{ThreadID: tid("0000a000", 1), Status: "done", Priority: "normal"}
	for i, e := range []index.Entry{old, {ThreadID: tid("0000b000", 2), Status: "done", Priority: "normal"}, {ThreadID: tid("0000b001", 3), Status: "done", Priority: "normal"}} {
		if _, err := ix.Add(e, ""); err != nil {
			t.Fatal(i, err)
		}
	}
	leaf := filepath.Join(dir, "status", "done", "0000a", "00", "0")
	os.RemoveAll(leaf)
	if err := os.Symlink("0", leaf); err != nil {
		t.Fatal(err)
	}
	if got := newest(t, ix, "", []string{"done"}, 2); !slices.Equal(got, []string{tid("0000b001", 3), tid("0000b000", 2)}) {
		t.Fatalf("newest 2: %v", got)
	}
	if _, err := ix.ByStatus([]string{"done"}); err == nil {
		t.Fatal("a full walk read past the broken bucket without error: the test proves nothing")
	}
}

// TestWalkFindsMisplacedMarkers: a marker outside its bucket (a flat
// status/done/<id>.<prio>) is still reported, so that fsck can remove it.
func TestWalkFindsMisplacedMarkers(t *testing.T) {
	ix, dir := newSharded(t)
	p := filepath.Join(dir, "status", "done", tid("0000a000", 1)+".normal")
	os.MkdirAll(filepath.Dir(p), 0o700)
	os.WriteFile(p, nil, 0o600)
	var found []string
	if err := ix.Walk(func(e index.Entry, path string) { found = append(found, path) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(found, []string{p}) {
		t.Fatalf("walk found %v, want %v", found, p)
	}
	e := index.Entry{ThreadID: tid("0000a000", 1), Status: "done", Priority: "normal"}
	if slices.Contains(ix.Paths(e), p) {
		t.Fatal("Paths names the misplaced marker")
	}
	if err := ix.RemoveMarker(e, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "status")); err != nil {
		t.Fatalf("pruning a misplaced marker removed the status tree: %v", err)
	}
}

// TestConcurrentAddAndPrune: adders and removers share one bucket, so
// buckets are emptied and deleted while others are placing markers in
// them; every Add must leave its marker in place.
func TestConcurrentAddAndPrune(t *testing.T) {
	ix, _ := newSharded(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				e := index.Entry{ThreadID: tid("0000a000", g*1000+i), Status: "done", AssignedTo: "X", Priority: "normal"}
				if _, err := ix.Add(e, ""); err != nil {
					errs <- err
					return
				}
				for _, p := range ix.Paths(e) {
					if _, err := os.Lstat(p); err != nil {
						errs <- fmt.Errorf("marker gone right after Add: %w", err)
						return
					}
				}
				if err := ix.Remove(e, index.Entry{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, _ := ix.ByStatus([]string{"done"}); len(got) != 0 {
		t.Fatalf("markers left: %v", ids(got))
	}
}
