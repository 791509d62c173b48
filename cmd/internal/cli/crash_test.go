package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

var crashDuration = flag.Duration("crash.duration", crashDefault(),
	"how long TestCrashSuite kills processes (10s; 2m with -tags long; go test ./cmd/internal/cli -run CrashSuite -crash.duration 20m for a long run)")

// crashDefault is how long TestCrashSuite runs when not told: long enough
// for every kind of operation to be killed at many instants (hundreds of
// kills in 10 s), and a soak in the long run.
func crashDefault() time.Duration {
	if testproc.Long {
		return 2 * time.Minute
	}
	return 10 * time.Second
}

var crashKeep = flag.String("crash.keep", "",
	"copy the store of a failed TestCrashSuite run to this directory, for inspection")

// ack is an operation that exited 0: it must survive.
type ack struct {
	op       string // send, reply, claim, done, drop
	thread   string
	message  string
	token    int64
	finished time.Time
}

type crashRun struct {
	t      *testing.T
	db     string
	intake string
	inbox  string
	mu     sync.Mutex
	acks   []ack
	ops    atomic.Int64
	kills  atomic.Int64
	reads  atomic.Int64
	drops  atomic.Int64
	tids   []string
}

func (c *crashRun) thread() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tids[rand.IntN(len(c.tids))]
}

// run starts one CLI command and, with probability killP, kills it with
// SIGKILL after a random delay of up to 8 ms — before, during or after its
// commit. It returns stdout and whether the command exited 0 by itself.
func (c *crashRun) run(killP float64, args ...string) ([]byte, bool) {
	cmd := exec.Command(c.inbox, append([]string{"--db", c.db, "--json"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		c.t.Error(err)
		return nil, false
	}
	c.ops.Add(1)
	if rand.Float64() < killP {
		time.Sleep(time.Duration(rand.IntN(8000)) * time.Microsecond)
		if cmd.Process.Kill() == nil {
			c.kills.Add(1)
		}
	}
	err := cmd.Wait()
	return out.Bytes(), err == nil
}

func (c *crashRun) record(a ack) {
	a.finished = time.Now()
	c.mu.Lock()
	c.acks = append(c.acks, a)
	if a.op == "send" {
		c.tids = append(c.tids, a.thread)
	}
	c.mu.Unlock()
}

// writer runs random writes until stop closes.
func (c *crashRun) writer(w int, stop <-chan struct{}) {
	agent := fmt.Sprintf("w%d", w)
	token := map[string]int64{}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		var o cliOut
		switch r := rand.IntN(10); {
		case r < 2:
			out, ok := c.run(0.3, "send", "--from", "boss", "--to", agent, "--subject", fmt.Sprintf("%s job %d", agent, n))
			if ok && json.Unmarshal(out, &o) == nil {
				c.record(ack{op: "send", thread: o.Thread.ThreadID, message: o.Message.MessageID})
			}
		case r < 5:
			tid := c.thread()
			out, ok := c.run(0.3, "reply", "--from", agent, "--thread", tid, "--kind", "progress", "--summary", fmt.Sprintf("%s note %d", agent, n))
			if ok && json.Unmarshal(out, &o) == nil {
				c.record(ack{op: "reply", thread: tid, message: o.Message.MessageID})
			}
		case r < 7:
			tid := c.thread()
			out, ok := c.run(0.3, "claim", "--agent", agent, "--thread", tid)
			if ok && json.Unmarshal(out, &o) == nil {
				token[tid] = o.Lease.LeaseToken
				c.record(ack{op: "claim", thread: tid, token: o.Lease.LeaseToken})
			}
		case r < 9:
			for tid, tok := range token {
				out, ok := c.run(0.3, "update", "--agent", agent, "--thread", tid, "--status", "in_progress",
					"--lease-token", fmt.Sprint(tok), "--summary", fmt.Sprintf("%s working %d", agent, n))
				if ok && json.Unmarshal(out, &o) == nil {
					c.record(ack{op: "update", thread: tid, message: o.Message.MessageID})
				}
				break
			}
		default:
			for tid, tok := range token {
				delete(token, tid)
				out, ok := c.run(0.3, "done", "--agent", agent, "--thread", tid, "--lease-token", fmt.Sprint(tok), "--summary", "finished")
				if ok && json.Unmarshal(out, &o) == nil {
					c.record(ack{op: "done", thread: tid, message: o.Message.MessageID})
				}
				break
			}
		}
	}
}

// reader keeps reading while everything crashes around it: no read may
// ever fail or print something that is not a whole JSON object.
func (c *crashRun) reader(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		var args []string
		switch rand.IntN(4) {
		case 0:
			args = []string{"show", "--thread", c.thread()}
		case 1:
			args = []string{"fetch", "--agent", fmt.Sprintf("w%d", rand.IntN(4))}
		case 2:
			args = []string{"list", "--limit", "100"}
		default:
			args = []string{"events", "--limit", "200", "--after-event", fmt.Sprint(rand.IntN(50))}
		}
		cmd := exec.Command(c.inbox, append([]string{"--db", c.db, "--json"}, args...)...)
		out, err := cmd.Output()
		c.reads.Add(1)
		code, _ := exitStatus(err)
		var v map[string]any
		if jerr := json.Unmarshal(out, &v); jerr != nil || (code != 0 && !(code == 10 && args[0] == "fetch")) {
			c.t.Errorf("reader %v: exit %d, output %q", args, code, out)
		}
	}
}

// daemonLoop runs the daemon and kills it with SIGKILL now and then, while
// descriptors are dropped.
func (c *crashRun) daemonLoop(stop <-chan struct{}) {
	for i := 0; ; i++ {
		cmd := exec.Command(c.inbox, "daemon", "--db", c.db, "--intake", c.intake)
		if err := cmd.Start(); err != nil {
			c.t.Error(err)
			return
		}
		for j := 0; j < 5; j++ {
			storetest.Drop(c.t, c.intake, fmt.Sprintf("d-%05d-%d.task.json", i, j), fmt.Sprintf(`{"version":1,"kind":"prompt","prompt":"drop %d %d"}`, i, j))
			c.drops.Add(1)
			time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
		}
		select {
		case <-stop:
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
			return
		default:
		}
		cmd.Process.Kill()
		cmd.Wait()
		c.kills.Add(1)
	}
}

// taskLoop pushes tasks to boss's queue and runs them — text output,
// binary output (always a blob), failures with partial output — and
// kills runners with SIGKILL at random instants while tasks finish and
// blobs are written; boss's check reaps what a dead runner left.
func (c *crashRun) taskLoop(helper string, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		for j := 0; j < 3; j++ {
			size, seed, code := rand.IntN(2000), i*3+j+1, 0
			switch rand.IntN(10) {
			case 0, 1, 2:
				seed, size = -seed, 100+rand.IntN(5000) // binary: a blob
			case 3:
				code = 1
			}
			c.run(0.2, "push", "--agent", "boss", "--name", fmt.Sprintf("k%05d-%d", i, j), fmt.Sprintf("%d %d %d", size, seed, code))
		}
		out, ok := c.run(0, "run", "--agent", "boss", "--exec", shq(helper)+" emit")
		var r struct {
			PID int `json:"runner_pid"`
		}
		if ok && json.Unmarshal(out, &r) == nil && r.PID > 0 && rand.IntN(2) == 0 {
			time.Sleep(time.Duration(rand.IntN(30000)) * time.Microsecond)
			if syscall.Kill(r.PID, syscall.SIGKILL) == nil {
				c.kills.Add(1)
			}
		}
		c.run(0.2, "check", "--agent", "boss")
	}
}

// checkTasks: every finished task delivered its result exactly once (one
// message from the task in its thread, one mailbox entry for it), none
// stays running, and a queued one delivered nothing.
func (c *crashRun) checkTasks(s *spool.Store) (finished, queued int) {
	t := c.t
	// Reap what dead runners left, and let live ones finish.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _ := c.run(0, "queue", "--agent", "boss")
		var q struct {
			Running []any `json:"running"`
		}
		if json.Unmarshal(out, &q) == nil && len(q.Running) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks still running a minute after the last runner: %s", out)
		}
	}
	tasks, err := s.Tasks(t.Context(), inbox.TaskFilter{Owner: "boss"})
	if err != nil {
		t.Fatal(err)
	}
	// Mailbox entries (waiting or collected) that are the message file
	// itself: a kill between linking an entry and the commit point leaves
	// one that is not (a stale entry, which readers skip and fsck
	// removes), and the seq may then go to another message.
	markers := map[string]int{} // thread~seq → mailbox entries
	for _, dir := range []string{filepath.Join(c.db, "mailbox", "boss"), filepath.Join(c.db, "mailbox", "boss", ".collected")} {
		names, _ := os.ReadDir(dir)
		for _, n := range names {
			parts := strings.Split(n.Name(), "~")
			if len(parts) != 4 {
				continue
			}
			seq, _ := strconv.Atoi(parts[3])
			a, err1 := os.Stat(filepath.Join(dir, n.Name()))
			b, err2 := os.Stat(filepath.Join(c.db, "threads", parts[2], fmt.Sprintf("m-%08d.json", seq)))
			if err1 == nil && err2 == nil && os.SameFile(a, b) {
				markers[parts[2]+"~"+parts[3]]++
			}
		}
	}
	for _, tk := range tasks {
		v, err := s.Show(t.Context(), tk.ThreadID)
		if err != nil {
			t.Fatal(err)
		}
		results := 0
		for _, m := range v.Messages {
			if m.FromAgent == tk.Name {
				results++
				if n := markers[fmt.Sprintf("%s~%d", tk.ThreadID, m.Seq)]; n != 1 {
					t.Errorf("task %s: its result %s has %d mailbox entries", tk.Name, m.MessageID, n)
				}
			}
		}
		switch tk.State() {
		case "finished":
			finished++
			if results != 1 {
				t.Errorf("task %s (%s) delivered %d results", tk.Name, tk.Status, results)
			}
		case "queued":
			queued++
			if results != 0 {
				t.Errorf("queued task %s delivered %d results", tk.Name, results)
			}
		default:
			t.Errorf("task %s is still %s", tk.Name, tk.Status)
		}
	}
	return finished, queued
}

// TestCrashSuite runs concurrent CLI writers, readers and the daemon
// against one store while killing processes with SIGKILL at random
// instants, then checks that everything acknowledged is there exactly
// once, that fsck --repair leaves a clean store, and that event ids are
// unique and increasing.
func TestCrashSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	// Most of its time it waits: for the runners it killed before they
	// recorded themselves to count as gone (30 s). The scripts run
	// meanwhile.
	t.Parallel()
	db, ids := newStore(t, 8)
	in := filepath.Join(t.TempDir(), "intake")
	if err := os.Mkdir(in, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && *crashKeep != "" {
			out, err := exec.Command("cp", "-a", db, *crashKeep).CombinedOutput()
			t.Logf("store kept in %s (%v %s)", *crashKeep, err, out)
		}
	})
	c := &crashRun{t: t, db: db, intake: in, inbox: testproc.Installed(t, "inbox"), tids: ids}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() { defer wg.Done(); c.writer(w, stop) }()
	}
	wg.Add(3)
	go func() { defer wg.Done(); c.reader(stop) }()
	go func() { defer wg.Done(); c.daemonLoop(stop) }()
	go func() { defer wg.Done(); c.taskLoop(testproc.Installed(t, "inbox-test-helper"), stop) }()
	time.Sleep(*crashDuration)
	close(stop)
	wg.Wait()
	// A last clean daemon run finishes the drops that are still pending.
	cmd := exec.Command(c.inbox, "daemon", "--db", db, "--intake", in)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// It may have a long backlog after a long run: wait while it makes
	// progress, up to 30 s without any.
	left := -1
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m, _ := filepath.Glob(filepath.Join(in, "*.task.json"))
		if len(m) == 0 {
			break
		}
		if len(m) != left {
			left, deadline = len(m), time.Now().Add(30*time.Second)
		}
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()

	s, err := spool.Open(t.Context(), db, spool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tasksFinished, tasksQueued := c.checkTasks(s)

	// Blobs are never half-written or missing, whatever was killed: fsck
	// may only find orphans (a kill between a blob's link and its
	// message's commit), which --repair removes.
	out, _ := c.run(0, "fsck")
	var before inbox.FsckReport
	json.Unmarshal(out, &before)
	for _, f := range before.Findings {
		if f.Check == "damaged_blob" || f.Check == "missing_blob" {
			t.Errorf("fsck after the kills: %+v", f)
		}
	}

	// fsck --repair settles what the kills left; then fsck is clean.
	out, ok := c.run(0, "fsck", "--repair")
	if !ok {
		t.Fatalf("fsck --repair did not leave a clean store: %s", out)
	}
	var rep inbox.FsckReport
	json.Unmarshal(out, &rep)
	if out, ok := c.run(0, "fsck"); !ok {
		t.Fatalf("fsck after repair: %s", out)
	}

	// Every message in the store, counted: every thread directory (list
	// stops at --limit's maximum, which a long run passes).
	count := map[string]int{}
	threads, err := os.ReadDir(filepath.Join(db, "threads"))
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	tokens := map[string]int64{}
	for _, th := range threads {
		v, err := s.Show(t.Context(), th.Name())
		if errors.Is(err, inbox.ErrNotFound) {
			continue // created, never committed: fsck --repair leaves it
		}
		if err != nil {
			t.Fatal(err)
		}
		status[th.Name()] = v.Thread.Status
		if v.Lease != nil {
			tokens[th.Name()] = v.Lease.LeaseToken
		}
		for _, m := range v.Messages {
			count[m.MessageID]++
		}
	}
	lastToken := map[string]int64{}
	for _, a := range c.acks {
		switch a.op {
		case "send", "reply", "update", "done":
			if count[a.message] != 1 {
				t.Errorf("acknowledged %s %s in %s is there %d times", a.op, a.message, a.thread, count[a.message])
			}
		case "claim":
			if a.token > tokens[a.thread] {
				t.Errorf("acknowledged claim of %s with token %d, but the thread's token is %d", a.thread, a.token, tokens[a.thread])
			}
			if a.token <= lastToken[a.thread] {
				t.Errorf("thread %s: token %d granted after token %d", a.thread, a.token, lastToken[a.thread])
			}
			lastToken[a.thread] = a.token
		}
		if a.op == "done" && status[a.thread] != inbox.StatusDone {
			t.Errorf("acknowledged done of %s, but the thread is %s", a.thread, status[a.thread])
		}
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("message %s is stored %d times", id, n)
		}
	}
	// Event ids unique and increasing; each message has exactly one event.
	last, evPerMsg := eventsByMessage(t, s, func(ev *inbox.Event) bool {
		return ev.MessageID != "" && ev.EventType != inbox.EventThreadRead
	})
	for id := range count {
		if evPerMsg[id] != 1 {
			t.Errorf("message %s has %d events", id, evPerMsg[id])
		}
	}
	// Every dropped descriptor was finished once, one thread each.
	results, _ := filepath.Glob(filepath.Join(in, "*.task.json.result"))
	seen := map[string]string{}
	for _, r := range results {
		data, _ := os.ReadFile(r)
		var res intakeResult
		if json.Unmarshal(data, &res) != nil || !res.OK {
			t.Errorf("%s: %s", r, data)
			continue
		}
		if other, dup := seen[res.ThreadID]; dup {
			t.Errorf("thread %s serves %s and %s", res.ThreadID, other, r)
		}
		seen[res.ThreadID] = r
		if status[res.ThreadID] == "" {
			t.Errorf("%s names thread %s, which is not in the store", r, res.ThreadID)
		}
	}
	if int64(len(results)) != c.drops.Load() {
		t.Errorf("%d descriptors dropped, %d finished", c.drops.Load(), len(results))
	}
	repaired := 0
	for _, f := range rep.Findings {
		if f.Repaired {
			repaired++
		}
	}
	kinds := map[string]int{}
	for _, a := range c.acks {
		kinds[a.op]++
	}
	t.Logf("crash suite: %v, %d operations, %d SIGKILLs, %d reads, %d drops; %d acknowledged (%v) all present once; "+
		"%d tasks finished (each delivered once), %d still queued; "+
		"%d threads, %d messages, %d events; fsck --repair fixed %d findings: %s",
		*crashDuration, c.ops.Load(), c.kills.Load(), c.reads.Load(), c.drops.Load(), len(c.acks), kinds,
		tasksFinished, tasksQueued, len(status), len(count), last, repaired, findingKinds(rep.Findings))
}

func findingKinds(fs []inbox.Finding) string {
	m := map[string]int{}
	for _, f := range fs {
		m[f.Check]++
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return strings.Join(parts, " ")
}
