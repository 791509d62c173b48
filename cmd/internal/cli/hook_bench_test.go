package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// BenchmarkStopHook times, whole process, the stop hook of an agent with
// 1,000 uncollected messages against `inbox --version` (SPEC §13 wants it
// within 1.5 times), the two alternated trial by trial as bench/abtime
// does, and reports both medians and their ratio. The hook runs once
// before the trials, so that each timed run takes the path every stop
// after a session's first takes: nothing new, allowed. Use -benchtime=200x.
// bench/abtime measures the same from a shell (see bench/README.md).
func BenchmarkStopHook(b *testing.B) {
	s, db := storetest.New(b, spool.Options{})
	for i := range 1000 {
		if _, err := s.Send(b.Context(), inbox.SendInput{From: "lead", To: "dev", Content: inbox.Content{Body: fmt.Sprintf("note %d", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	// The inbox binary itself, as users run it: the test binary starts
	// slower (it links the tests and NATS), which would flatter the ratio.
	goBin, err := exec.LookPath("go")
	if err != nil {
		b.Fatalf("the go command builds the inbox binary: %v", err)
	}
	bin := filepath.Join(b.TempDir(), "inbox")
	build := exec.Command(goBin, "build", "-o", bin, "../../inbox")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build inbox: %v\n%s", err, out)
	}
	stdin := filepath.Join(b.TempDir(), "stop.json")
	if err := os.WriteFile(stdin, []byte(`{"session_id":"s","hook_event_name":"Stop","stop_hook_active":false}`), 0o600); err != nil {
		b.Fatal(err)
	}
	hook := func() *exec.Cmd {
		cmd := exec.Command(bin, "hook", "claude", "Stop", "--agent", "dev", "--db", db)
		f, err := os.Open(stdin)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		cmd.Stdin = f
		return cmd
	}
	if out, err := hook().Output(); err != nil || !strings.Contains(string(out), "1000 message(s)") {
		b.Fatalf("the first stop: %v %s", err, out)
	}
	// Each run's wall time, and its CPU time (user and system, page
	// faults included): on a machine others load, waiting for a CPU
	// stretches the wall time of the longer command more.
	type times struct{ wall, cpu []time.Duration }
	timed := func(cmd *exec.Cmd, t *times) {
		t0 := time.Now()
		out, err := cmd.Output()
		el := time.Since(t0)
		if err != nil || len(out) > 0 && cmd.Args[1] == "hook" {
			b.Fatalf("%s: %v %s", cmd.Args[1], err, out)
		}
		t.wall = append(t.wall, el)
		t.cpu = append(t.cpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	}
	var hooks, versions times
	b.ResetTimer()
	for range b.N {
		timed(hook(), &hooks)
		timed(exec.Command(bin, "--version"), &versions)
	}
	b.StopTimer()
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	h, v := median(hooks.wall), median(versions.wall)
	hc, vc := median(hooks.cpu), median(versions.cpu)
	b.ReportMetric(h, "hook-ms")
	b.ReportMetric(v, "version-ms")
	b.ReportMetric(h/v, "ratio")
	b.ReportMetric(hc, "hook-cpu-ms")
	b.ReportMetric(vc, "version-cpu-ms")
	b.ReportMetric(hc/vc, "cpu-ratio")
	b.ReportMetric(0, "ns/op")
}
