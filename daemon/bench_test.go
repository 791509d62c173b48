package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/watcher"
)

// BenchmarkDropToResult measures single drops: from the rename of a
// descriptor into the intake directory to its .result being in place.
// It reports the median and 99th percentile; use -benchtime=300x.
func BenchmarkDropToResult(b *testing.B) {
	dir := startDaemon(b).dir
	w, err := watcher.New(dir, watcher.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("single-%06d.task.json", i)
		t0 := time.Now()
		storetest.Drop(b, dir, name, `{"version":1,"kind":"prompt","prompt":"benchmark"}`)
		for {
			if _, err := os.Stat(filepath.Join(dir, name+".result")); err == nil {
				break
			}
			select {
			case <-w.C:
			case <-time.After(10 * time.Millisecond):
			}
		}
		lat = append(lat, time.Since(t0))
		time.Sleep(20 * time.Millisecond) // single drops, not a burst
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkBurst drops b.N descriptors at once into a running daemon and
// reports how many it finishes per second (first drop to the daemon's
// saying it dispatched the last).
// Use -benchtime=10000x.
func BenchmarkBurst(b *testing.B) {
	r := startDaemon(b)
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		storetest.Drop(b, r.dir, fmt.Sprintf("burst-%06d.task.json", i), fmt.Sprintf(`{"version":1,"kind":"prompt","prompt":"job %d"}`, i))
	}
	r.log.wait(b, b.N, "descriptor dispatched")
	el := time.Since(t0)
	b.ReportMetric(float64(b.N)/el.Seconds(), "descriptors/s")
	b.ReportMetric(0, "ns/op")
}
