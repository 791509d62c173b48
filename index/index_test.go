package index_test

import (
	"os"
	"path/filepath"
	"slices"
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
	ix := index.Open(dir, 0o600, 0o700)
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
