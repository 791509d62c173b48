package cli

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// BenchmarkQueue pushes b.N trivial tasks, runs them two at a time with a
// real detached runner (`inbox run 2 --exec true`), and receives every
// result. It reports tasks per second and the overhead per task beyond
// the command itself (the time `sh -c true` alone takes is subtracted),
// counted per running slot. Use -benchtime=1000x.
func BenchmarkQueue(b *testing.B) {
	const slots = 2
	s, db := storetest.New(b, spool.Options{})
	for i := 0; i < b.N; i++ {
		if _, err := s.Push(b.Context(), inbox.TaskSpec{Name: fmt.Sprintf("t%06d", i)}, "nothing to do"); err != nil {
			b.Fatal(err)
		}
	}
	// The command alone: sh -c true.
	t0 := time.Now()
	for i := 0; i < 50; i++ {
		exec.Command("/bin/sh", "-c", "true").Run()
	}
	cmdCost := time.Since(t0) / 50

	bin := testproc.Installed(b, "inbox")
	b.ResetTimer()
	start := time.Now()
	if out, err := exec.Command(bin, "--db", db, "run", fmt.Sprint(slots), "--exec", "true").CombinedOutput(); err != nil {
		b.Fatalf("run: %v %s", err, out)
	}
	got := 0
	for got < b.N {
		m, err := s.Receive(context.Background(), "main", "", false, inbox.WaitOptions{Timeout: 30 * time.Second})
		if err != nil || m == nil {
			b.Fatalf("receive after %d results: %v", got, err)
		}
		if m.Kind != inbox.KindResult {
			b.Fatalf("unexpected %s message from %s", m.Kind, m.FromAgent)
		}
		got++
	}
	el := time.Since(start)
	b.StopTimer()
	perTask := el * slots / time.Duration(b.N)
	b.ReportMetric(float64(b.N)/el.Seconds(), "tasks/s")
	b.ReportMetric(float64((perTask-cmdCost).Microseconds())/1000, "overhead-ms/task")
	b.ReportMetric(float64(cmdCost.Microseconds())/1000, "command-ms")
	b.ReportMetric(0, "ns/op")
}
