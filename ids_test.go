package inbox

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestNewIDMonotonic: ids one process makes sort in the order it made
// them, also within one millisecond (the same time given again and
// again), also when a caller's time is a little behind the last id's (it
// read the clock before another goroutine made its id); they stay
// unique, and an id still carries its own time once that is later.
func TestNewIDMonotonic(t *testing.T) {
	at := time.Now()
	var ids []string
	for i := 0; i < 10000; i++ {
		ids = append(ids, NewID("thr_", at))
	}
	ids = append(ids, NewID("thr_", at.Add(-50*time.Millisecond)))
	ids = append(ids, NewID("thr_", at.Add(-time.Millisecond)))
	if !slices.IsSorted(ids) {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("id %d %s sorts before id %d %s, made earlier", i, ids[i], i-1, ids[i-1])
			}
		}
	}
	if c := slices.Compact(slices.Clone(ids)); len(c) != len(ids) {
		t.Fatalf("%d ids, %d distinct", len(ids), len(c))
	}
	later := at.Add(time.Second)
	id := NewID("thr_", later)
	if want := encode("thr_", uint64(later.UnixMilli()), [10]byte{}); id[:14] != want[:14] || id <= ids[len(ids)-1] {
		t.Fatalf("an id of a later time %s: %s, want its time %s and after %s", later, id, want[:14], ids[len(ids)-1])
	}
}

// TestNewIDConcurrent: ids made by many goroutines at once are unique,
// and each goroutine's own ids sort in the order it made them.
func TestNewIDConcurrent(t *testing.T) {
	const goroutines, each = 8, 2000
	got := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				got[g] = append(got[g], NewID("msg_", time.Now()))
			}
		}()
	}
	wg.Wait()
	var all []string
	for g, ids := range got {
		if !slices.IsSorted(ids) {
			t.Errorf("goroutine %d's ids are out of the order it made them in", g)
		}
		all = append(all, ids...)
	}
	slices.Sort(all)
	if c := slices.Compact(all); len(c) != goroutines*each {
		t.Fatalf("%d ids, %d distinct", goroutines*each, len(c))
	}
}
