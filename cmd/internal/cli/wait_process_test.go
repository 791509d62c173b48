package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// cpuTicks returns a process's user+system CPU time in clock ticks.
func cpuTicks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may contain spaces).
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st, nil
}

// TestManyWaitersWake starts 64 wait-reply processes (200 in the long
// run) on as many threads, checks that while they wait they use (almost)
// no CPU, then replies to every thread and checks that each waiter wakes
// with its own answer. The long run's 200 is past the usual per-user
// limit of inotify instances (128), so some waiters poll, and their cost
// is checked too. The default run stays well under that limit: go test
// ./... runs other packages beside this one, and their watchers share the
// user's instances (150 waiters here made the watcher package's own tests
// fail to initialise inotify).
func TestManyWaitersWake(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 64 processes")
	}
	n := 64
	if testproc.Long {
		n = 200
	}
	db, ids := newStore(t, n)
	bin := testproc.Installed(t, "inbox")
	type waiter struct {
		cmd      *exec.Cmd
		out, err *os.File
	}
	ws := make([]waiter, n)
	dir := t.TempDir()
	for i, tid := range ids {
		out, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "wait-reply", "--db", db, "--json", "--thread", tid, "--timeout-seconds", "60")
		errf, err := os.Create(filepath.Join(dir, fmt.Sprint(i, ".err")))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, errf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ws[i] = waiter{cmd, out, errf}
	}
	defer func() {
		for _, w := range ws {
			if w.cmd.ProcessState == nil {
				w.cmd.Process.Kill()
				w.cmd.Wait()
			}
		}
	}()
	ticks := func() []int64 {
		out := make([]int64, n)
		for i, w := range ws {
			c, err := cpuTicks(w.cmd.Process.Pid)
			if err != nil {
				t.Fatalf("waiter exited early: %v", err)
			}
			out[i] = c
		}
		return out
	}
	sum := func(xs []int64) (s int64) {
		for _, x := range xs {
			s += x
		}
		return s
	}
	// Wait until every waiter has finished starting (200 copies of the
	// test binary on a small machine): no CPU used for a whole second.
	before := ticks()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		now := ticks()
		if sum(now) == sum(before) {
			break
		}
		before = now
	}
	const idle = 3 * time.Second
	time.Sleep(idle)
	after := ticks()
	// Waiters beyond the per-user inotify instance limit
	// (fs.inotify.max_user_instances, often 128) poll, and say so.
	var notified, polling, notifiedTicks, pollingTicks int64
	for i, w := range ws {
		msg, _ := os.ReadFile(w.err.Name())
		if strings.Contains(string(msg), "polling") {
			polling++
			pollingTicks += after[i] - before[i]
		} else {
			notified++
			notifiedTicks += after[i] - before[i]
		}
	}
	t.Logf("idle for %v: %d waiters on inotify used %d clock ticks; %d polling waiters used %d ticks (%.2f%% of a CPU each)",
		idle, notified, notifiedTicks, polling, pollingTicks,
		float64(pollingTicks)*10/float64(max(polling, 1))/float64(idle.Milliseconds())*100)
	// Clock ticks are 10 ms: waiters blocked on inotify use next to none
	// (the runtime's own background work lands a tick on one idle process
	// in ten to five, more on a loaded machine where the other packages'
	// tests run beside this one: 10 to 22 ticks for 128 waiters here); a
	// waiter that woke on anything but its file would cost at least what
	// a polling waiter costs, about a tick each in 3 s (measured beside
	// it), so a quarter of a tick each still tells the two apart. A
	// polling waiter lists a directory ten times a second, which must
	// stay well under 1% of a CPU.
	if notifiedTicks > max(2, notified/4) {
		t.Errorf("%d waiters on inotify used %d clock ticks in %v, want about 0", notified, notifiedTicks, idle)
	}
	if polling > 0 && float64(pollingTicks)*10/float64(polling) > 0.01*float64(idle.Milliseconds()) {
		t.Errorf("%d polling waiters used %d clock ticks in %v: more than 1%% of a CPU each", polling, pollingTicks, idle)
	}

	s, err := spool.Open(t.Context(), db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, n)
	for i, tid := range ids {
		r, err := s.Reply(t.Context(), "boss", "", tid, inbox.KindAnswer, inbox.Content{Summary: fmt.Sprint("answer ", i)})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = r.Message.MessageID
	}
	for i, w := range ws {
		if err := w.cmd.Wait(); err != nil {
			t.Errorf("waiter %d: %v", i, err)
			continue
		}
		data, _ := os.ReadFile(w.out.Name())
		var got struct {
			Woke    bool `json:"woke"`
			Message struct {
				MessageID string `json:"message_id"`
			} `json:"message"`
		}
		if err := json.Unmarshal(data, &got); err != nil || !got.Woke || got.Message.MessageID != want[i] {
			t.Errorf("waiter %d printed %s, want message %s", i, data, want[i])
		}
	}
}

// BenchmarkWakeLatency measures, process to process, the time from the
// moment a reply's write is durable (s.Reply has returned in this process)
// to a separate `inbox wait-reply` process printing it, and reports the
// median and 99th percentile. Run with -benchtime=200x for 200 trials.
// A negative value means the waiter printed before the replier's call
// returned (it wakes on the event append, after the commit point).
func BenchmarkWakeLatency(b *testing.B) {
	s, db := storetest.New(b, spool.Options{})
	bin := testproc.Installed(b, "inbox")
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		r, err := s.Send(b.Context(), inbox.SendInput{From: "Y", To: "X", Subject: "q"})
		if err != nil {
			b.Fatal(err)
		}
		tid := r.Thread.ThreadID
		cmd := exec.Command(bin, "wait-reply", "--db", db, "--json", "--thread", tid, "--timeout-seconds", "30")
		pipe, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the waiter starts and blocks
		printed := make(chan time.Time, 1)
		go func() {
			br := bufio.NewReader(pipe)
			br.ReadBytes('\n')
			printed <- time.Now()
			io.Copy(io.Discard, br)
		}()
		if _, err := s.Reply(b.Context(), "X", "", tid, inbox.KindAnswer, inbox.Content{Summary: "a"}); err != nil {
			b.Fatal(err)
		}
		durable := time.Now()
		select {
		case p := <-printed:
			lat = append(lat, p.Sub(durable))
		case <-time.After(10 * time.Second):
			b.Fatal("waiter did not wake")
		}
		cmd.Wait()
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(float64(pct(0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(pct(0.99).Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
}

// TestBlockingInterrupted starts each blocking command (wait-reply, watch,
// receive, events --follow) as its own process, waits until it is really
// blocked (its agent shows as waiting, or the follower has printed the
// first event), sends SIGINT or SIGTERM, and checks that it ends at once
// with 130 or 143, "woke":false and "interrupted":true in JSON and a line
// saying so on stderr for people: never the timeout's exit 10.
func TestBlockingInterrupted(t *testing.T) {
	db, ids := newStore(t, 1)
	tid := ids[0]
	bin := testproc.Installed(t, "inbox")
	s, err := spool.Open(t.Context(), db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	waiting := func(agent string) bool {
		as, err := s.Agents(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.Agent == agent {
				return a.State == inbox.StateWaiting
			}
		}
		return false
	}
	sigs := []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}}
	cmds := []struct {
		name string
		args func(agent string) []string
	}{
		{"wait-reply", func(a string) []string { return []string{"wait-reply", "--agent", a, "--thread", tid} }},
		{"watch", func(a string) []string { return []string{"watch", "--agent", a} }},
		{"receive", func(a string) []string { return []string{"receive", "--agent", a} }},
		{"events", func(string) []string { return []string{"events", "--follow"} }},
	}
	n := 0
	for _, c := range cmds {
		for _, sg := range sigs {
			for _, asJSON := range []bool{true, false} {
				n++
				agent := fmt.Sprintf("waiter-%d", n)
				t.Run(fmt.Sprintf("%s/%v/json=%v", c.name, sg.sig, asJSON), func(t *testing.T) {
					args := append(c.args(agent), "--db", db)
					if asJSON {
						args = append(args, "--json")
					}
					cmd := exec.Command(bin, args...)
					var stderr strings.Builder
					cmd.Stderr = &stderr
					pipe := startPiped(t, cmd, cmd.StdoutPipe)
					lines := make(chan string, 100)
					go func() {
						defer close(lines)
						sc := bufio.NewScanner(pipe)
						for sc.Scan() {
							lines <- sc.Text()
						}
					}()
					var out []string
					if c.name == "events" {
						// Its first line comes after its signal handler is set.
						select {
						case l := <-lines:
							out = append(out, l)
						case <-time.After(10 * time.Second):
							t.Fatal("events --follow printed nothing")
						}
					} else if !testproc.Poll(10*time.Second, func() bool { return waiting(agent) }) {
						t.Fatalf("%s never showed as waiting; stderr: %s", agent, stderr.String())
					}
					sent := time.Now()
					if err := cmd.Process.Signal(sg.sig); err != nil {
						t.Fatal(err)
					}
					for l := range lines {
						out = append(out, l)
					}
					done := make(chan error, 1)
					go func() { done <- cmd.Wait() }()
					var werr error
					select {
					case werr = <-done:
					case <-time.After(10 * time.Second):
						t.Fatalf("still running 10s after %v", sg.sig)
					}
					code, err := exitStatus(werr)
					if err != nil {
						t.Fatalf("%v; stderr: %s", err, stderr.String())
					}
					if code != sg.code {
						t.Errorf("exit %d after %v, want %d; stdout %q, stderr %q", code, sg.sig, sg.code, out, stderr.String())
					}
					if took := time.Since(sent); took > 3*time.Second {
						t.Errorf("took %v to end after %v", took, sg.sig)
					}
					if asJSON {
						if len(out) == 0 {
							t.Fatal("no JSON printed")
						}
						var got struct {
							Command     string `json:"command"`
							Woke        *bool  `json:"woke"`
							Interrupted bool   `json:"interrupted"`
						}
						last := out[len(out)-1]
						if err := json.Unmarshal([]byte(last), &got); err != nil {
							t.Fatalf("last line %q: %v", last, err)
						}
						if got.Command != c.name || got.Woke == nil || *got.Woke || !got.Interrupted {
							t.Errorf("last line %q, want command %q with \"woke\":false and \"interrupted\":true", last, c.name)
						}
						if stderr.Len() > 0 {
							t.Errorf("stderr with --json: %q", stderr.String())
						}
					} else {
						if !strings.Contains(stderr.String(), "interrupted") {
							t.Errorf("stderr %q does not say interrupted", stderr.String())
						}
						if strings.Contains(stderr.String(), "within") {
							t.Errorf("stderr %q reads like a timeout", stderr.String())
						}
					}
				})
			}
		}
	}
}

// TestWaitKindsNotation checks that --kinds and --types take the seed's
// "answer|control|result" notation as well as commas (SPEC §7), and that
// an unknown kind among the alternatives is still refused naming it.
func TestWaitKindsNotation(t *testing.T) {
	db, ids := newStore(t, 2)
	bin := testproc.Installed(t, "inbox")
	s, err := spool.Open(t.Context(), db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reply(t.Context(), "X", "", ids[0], inbox.KindControl, inbox.Content{Summary: "stop"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reply(t.Context(), "X", "", ids[1], "", inbox.Content{Summary: "status", Type: "task_status_response"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--thread", ids[0], "--kinds", "answer|control"}, 0, `"summary":"stop"`},
		{[]string{"--thread", ids[0], "--kinds", "answer | control|result"}, 0, `"summary":"stop"`},
		{[]string{"--thread", ids[0], "--kinds", "answer|result"}, 10, `"woke":false`},
		{[]string{"--thread", ids[0], "--kinds", "answer|contrl"}, 30, `contrl`},
		{[]string{"--thread", ids[1], "--types", "task_status_request|task_status_response"}, 0, `"summary":"status"`},
		{[]string{"--thread", ids[1], "--types", "idle_notification|task_completion,task_status_request"}, 10, `"woke":false`},
	} {
		args := append([]string{"wait-reply", "--db", db, "--json", "--after-event", "0", "--timeout-seconds", "0"}, c.args...)
		out, err := exec.Command(bin, args...).Output()
		code, xerr := exitStatus(err)
		if xerr != nil {
			t.Fatalf("%v: %v", c.args, xerr)
		}
		if code != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: exit %d, %s; want exit %d with %s", c.args, code, out, c.code, c.want)
		}
	}
}

// TestContribScripts runs the scripts of contrib/testdata, which run the
// contrib tools (found at $CONTRIB) for real against the real binary.
func TestContribScripts(t *testing.T) {
	t.Parallel()
	contrib, err := filepath.Abs(filepath.Join("..", "..", "..", "contrib"))
	if err != nil {
		t.Fatal(err)
	}
	p := scriptParams(filepath.Join(contrib, "testdata"))
	setup := p.Setup
	p.Setup = func(e *testscript.Env) error {
		e.Setenv("CONTRIB", contrib)
		return setup(e)
	}
	testscript.Run(t, p)
}
