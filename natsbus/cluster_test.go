package natsbus_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/natsbus"
)

// The cluster test: three JetStream servers, each its own process on its
// own loopback port, an R3 store, and agents in separate processes (this
// test binary run again as a helper) doing a claim race, idempotent sends
// and the worker loop while one server is killed with SIGKILL mid-run.
// Nothing acknowledged may be lost or made twice, each thread has exactly
// one winner, and blocked waits resume.

func TestMain(m *testing.M) {
	if role := os.Getenv("NATSBUS_HELPER"); role != "" {
		os.Exit(helper(context.TODO(), role))
	}
	os.Exit(testproc.M(m).Run()) // the servers' and agents' temp files in one directory, removed at exit
}

func helperBus(ctx context.Context) *natsbus.Bus {
	for {
		b, err := natsbus.Open(ctx, os.Getenv("NATSBUS_DB"), natsbus.Options{})
		if err == nil {
			return b
		}
		fmt.Fprintln(os.Stderr, "open:", err)
		time.Sleep(200 * time.Millisecond)
	}
}

// helper runs one agent process; what it was acknowledged goes to stdout.
func helper(ctx context.Context, role string) int {
	b := helperBus(ctx)
	defer b.Close()
	n := envInt("NATSBUS_N")
	me := os.Getenv("NATSBUS_AGENT")
	switch role {
	case "sender":
		// Each send is retried with its key until it is acknowledged,
		// as an agent that saw an error would.
		for i := 0; i < n; i++ {
			for {
				r, err := b.Send(ctx, inbox.SendInput{From: me, To: "sink", Content: inbox.Content{Body: fmt.Sprint("m", i),
					IdempotencyKey: fmt.Sprintf("%s-%d", me, i)}})
				if err == nil {
					fmt.Println(r.Thread.ThreadID)
					break
				}
				fmt.Fprintln(os.Stderr, "send:", err)
			}
		}
	case "claimer":
		for _, tid := range strings.Fields(os.Getenv("NATSBUS_THREADS")) {
			for {
				r, err := b.Claim(ctx, me, tid, 600)
				if err == nil {
					fmt.Println("won", tid, r.Lease.LeaseToken)
					break
				}
				if errors.Is(err, inbox.ErrLeaseConflict) {
					fmt.Println("lost", tid)
					break
				}
				fmt.Fprintln(os.Stderr, "claim:", err)
			}
		}
	case "worker":
		// Fetch, claim, ask, wait for the answer, finish: n times.
		for done := 0; done < n; {
			ts, err := b.Fetch(ctx, me, nil, 1, false)
			if err != nil || len(ts) == 0 {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			tid := ts[0].ThreadID
			c, err := b.Claim(ctx, me, tid, 600)
			if err != nil {
				continue
			}
			tok := c.Lease.LeaseToken
			must(retryOp(func() error {
				_, err := b.Update(ctx, me, tid, inbox.StatusBlocked, tok, inbox.Content{Summary: "which?", IdempotencyKey: "ask-" + tid})
				return err
			}))
			var w *inbox.WaitResult
			must(retryOp(func() (err error) {
				w, err = b.WaitReply(context.Background(), tid, inbox.ReplyCursor{Agent: me}, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: 60 * time.Second})
				if err == nil && !w.Woke {
					err = errors.New("no answer within 60 s")
				}
				return err
			}))
			must(retryOp(func() error {
				_, err := b.Done(ctx, me, tid, tok, inbox.Content{Summary: "answer was " + w.Message.Summary, IdempotencyKey: "done-" + tid})
				return err
			}))
			fmt.Println("done", tid)
			done++
		}
	case "leader":
		// Answer every blocked question of the threads it created.
		answered := map[string]bool{}
		var after *int64
		for len(answered) < n {
			w, err := b.Watch(context.Background(), me, []string{inbox.StatusBlocked}, after, inbox.WaitOptions{Timeout: 5 * time.Second})
			if err != nil {
				fmt.Fprintln(os.Stderr, "watch:", err)
				continue
			}
			if !w.Woke {
				// A timeout: look for blocked threads it may have missed.
				ts, err := b.List(ctx, inbox.ListFilter{CreatedBy: me, Statuses: []string{inbox.StatusBlocked}, Limit: 1000})
				if err == nil {
					for _, t := range ts {
						answer(ctx, b, me, t.ThreadID, answered)
					}
				}
				id := w.NextEventID
				after = &id
				continue
			}
			id := w.NextEventID
			after = &id
			answer(ctx, b, me, w.Thread.ThreadID, answered)
		}
	}
	return 0
}

func answer(ctx context.Context, b *natsbus.Bus, me, tid string, answered map[string]bool) {
	if answered[tid] {
		return
	}
	must(retryOp(func() error {
		_, err := b.Reply(ctx, me, "", tid, inbox.KindAnswer, inbox.Content{Summary: "postgres", IdempotencyKey: "answer-" + tid})
		return err
	}))
	answered[tid] = true
}

func retryOp(f func() error) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = f(); err == nil {
			return nil
		}
		fmt.Fprintln(os.Stderr, "retry:", err)
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "fatal:", err)
		os.Exit(1)
	}
}

func envInt(k string) int {
	var n int
	fmt.Sscan(os.Getenv(k), &n)
	return n
}

type cluster struct {
	procs []*exec.Cmd
	urls  []string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	natsd := filepath.Join(dir, "natsd")
	build := exec.Command("go", "build", "-o", natsd, "github.com/inbox-dev/inbox/internal/natsd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build natsd: %v\n%s", err, out)
	}
	ports := freePorts(t, 6)
	c := &cluster{}
	var routes []string
	for i := 0; i < 3; i++ {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i]))
		c.urls = append(c.urls, fmt.Sprintf("127.0.0.1:%d", ports[i]))
	}
	for i := 0; i < 3; i++ {
		ready := filepath.Join(dir, fmt.Sprint("ready", i))
		cmd := exec.Command(natsd, "-port", fmt.Sprint(ports[i]), "-dir", filepath.Join(dir, fmt.Sprint("n", i)),
			"-name", fmt.Sprint("n", i), "-cluster-port", fmt.Sprint(ports[3+i]), "-routes", strings.Join(routes, ","), "-ready", ready)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c.procs = append(c.procs, cmd)
	}
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.Process.Kill()
			p.Wait()
		}
	})
	for i := 0; i < 3; i++ {
		testproc.Eventually(t, 30*time.Second, fmt.Sprint("server ", i, " ready"), func() bool {
			_, err := os.Stat(filepath.Join(dir, fmt.Sprint("ready", i)))
			return err == nil
		})
	}
	return c
}

func (c *cluster) db(name string) string {
	return "nats://" + strings.Join(c.urls, ",") + "/" + name + "?replicas=3"
}

func TestClusterKill(t *testing.T) {
	c := startCluster(t)
	db := c.db("cluster")
	var b *natsbus.Bus
	testproc.Eventually(t, 60*time.Second, "the store opened on the cluster", func() bool {
		var err error
		b, err = natsbus.Open(t.Context(), db, natsbus.Options{Create: true})
		return err == nil
	})
	defer b.Close()

	const races, raceThreads, senders, sends, work = 8, 60, 2, 60, 10
	var raceTids []string
	for i := 0; i < raceThreads; i++ {
		r, err := b.Send(t.Context(), inbox.SendInput{From: "lead", To: "crowd", Subject: fmt.Sprint("race ", i), Content: inbox.Content{Body: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		raceTids = append(raceTids, r.Thread.ThreadID)
	}
	for i := 0; i < work; i++ {
		if _, err := b.Send(t.Context(), inbox.SendInput{From: "leader", To: "worker", Subject: fmt.Sprint("job ", i), Content: inbox.Content{Body: "x"}}); err != nil {
			t.Fatal(err)
		}
	}

	type run struct {
		name string
		cmd  *exec.Cmd
		out  bytes.Buffer
		errb bytes.Buffer
	}
	var runs []*run
	spawn := func(role, agent string, n int, extra ...string) *run {
		r := &run{name: role + " " + agent}
		r.cmd = exec.Command(os.Args[0], "-test.run", "^$")
		r.cmd.Env = append(os.Environ(), "NATSBUS_HELPER="+role, "NATSBUS_DB="+db, "NATSBUS_AGENT="+agent, fmt.Sprint("NATSBUS_N=", n))
		r.cmd.Env = append(r.cmd.Env, extra...)
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errb
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
		return r
	}
	start := time.Now()
	for i := 0; i < races; i++ {
		spawn("claimer", fmt.Sprint("c", i), 0, "NATSBUS_THREADS="+strings.Join(raceTids, " "))
	}
	for i := 0; i < senders; i++ {
		spawn("sender", fmt.Sprint("s", i), sends)
	}
	spawn("worker", "worker", work)
	spawn("leader", "leader", work)

	time.Sleep(500 * time.Millisecond)
	victim := 0 // the server the helpers' URLs name first
	var killedAt time.Duration
	if os.Getenv("NATSBUS_CLUSTER_NOKILL") == "" { // set it to time the same run without a kill
		c.procs[victim].Process.Signal(os.Kill)
		killedAt = time.Since(start)
	}

	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.cmd.Wait()
			if testing.Verbose() {
				t.Logf("%s finished after %v", r.name, time.Since(start).Round(time.Millisecond))
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		// SIGQUIT makes each stalled agent print where its goroutines are.
		for _, r := range runs {
			r.cmd.Process.Signal(syscall.SIGQUIT)
		}
		time.Sleep(2 * time.Second)
		for _, r := range runs {
			r.cmd.Process.Kill()
		}
		<-done
		for _, r := range runs {
			t.Logf("%s said:\n%s", r.name, r.errb.String())
		}
		t.Fatal("the agents did not finish within 3 minutes")
	}
	elapsed := time.Since(start)
	for _, r := range runs {
		if testing.Verbose() && r.errb.Len() > 0 {
			t.Logf("%s (exit %d) said:\n%s", r.name, r.cmd.ProcessState.ExitCode(), r.errb.String())
		}
		if r.cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("%s exited %d:\n%s", r.name, r.cmd.ProcessState.ExitCode(), r.errb.String())
		}
	}

	// Reads go to the two servers left.
	b2 := b
	// Exactly one winner per thread, and it holds the lease.
	winners := map[string][]string{}
	retries := 0
	for _, r := range runs {
		retries += strings.Count(r.errb.String(), "\n")
		if !strings.HasPrefix(r.name, "claimer") {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(r.out.Bytes()))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "won" {
				winners[f[1]] = append(winners[f[1]], strings.TrimPrefix(r.name, "claimer "))
			}
		}
	}
	for _, tid := range raceTids {
		w := winners[tid]
		if len(w) != 1 {
			t.Errorf("thread %s: winners %v, want exactly one", tid, w)
			continue
		}
		v, err := b2.Show(t.Context(), tid)
		if err != nil {
			t.Fatal(err)
		}
		if v.Lease == nil || v.Lease.AgentID != w[0] || v.Lease.LeaseToken != 1 {
			t.Errorf("thread %s: won by %s, lease %+v", tid, w[0], v.Lease)
		}
	}
	// Every acknowledged send is there, once.
	acked := map[string]bool{}
	for _, r := range runs {
		if strings.HasPrefix(r.name, "sender") {
			for _, tid := range strings.Fields(r.out.String()) {
				acked[tid] = true
			}
		}
	}
	if len(acked) != senders*sends {
		t.Errorf("%d distinct acknowledged sends, want %d", len(acked), senders*sends)
	}
	mail, err := b2.Mailbox(t.Context(), "sink", "")
	if err != nil {
		t.Fatal(err)
	}
	inStore := map[string]int{}
	for _, m := range mail {
		inStore[m.Message.ThreadID]++
	}
	for tid := range acked {
		if inStore[tid] != 1 {
			t.Errorf("acknowledged send %s is in the store %d times", tid, inStore[tid])
		}
	}
	if len(mail) != senders*sends {
		t.Errorf("the sink holds %d messages, want %d", len(mail), senders*sends)
	}
	// The worker loop finished every job, each with one answer and one result.
	jobs, err := b2.List(t.Context(), inbox.ListFilter{CreatedBy: "leader", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		v, err := b2.Show(t.Context(), j.ThreadID)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, m := range v.Messages {
			kinds[m.Kind]++
		}
		if v.Thread.Status != inbox.StatusDone || kinds[inbox.KindAnswer] != 1 || kinds[inbox.KindResult] != 1 || kinds[inbox.KindQuestion] != 1 {
			t.Errorf("job %s: %s with %v", j.ThreadID, v.Thread.Status, kinds)
		}
	}
	if len(jobs) != work {
		t.Errorf("%d jobs, want %d", len(jobs), work)
	}
	t.Logf("server n%d killed at %v; %d claim races over %d threads, %d idempotent sends, %d worker loops finished in %v; %d transient errors retried by the agents",
		victim, killedAt.Round(time.Millisecond), races, raceThreads, senders*sends, work, elapsed.Round(time.Millisecond), retries)
}

// freePorts returns n loopback ports free now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}
