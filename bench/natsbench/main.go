// Command natsbench measures the JetStream backend beside the directory
// backend in one run, through the operations interface (in process: no
// process start on either side; compare whole commands with bench/abtime):
//
//	go run ./bench/natsbench [-n 300]
//
// It starts its own servers (internal/natsd, built on the fly, each
// syncing every write): one for R1, a three-node loopback cluster for R3.
// For each backend it reports the p50 and p99 of send, claim, fetch (on a
// store of 1,000 threads) and wake (a reply's publish to the return of a
// wait-reply blocked on another connection), a claim race of 8
// processes-worth of connections on 200 threads (exactly one winner each)
// and the throughput of 16 concurrent senders.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/natsbus"
	"github.com/inbox-dev/inbox/spool"
)

func main() {
	n := flag.Int("n", 300, "samples per latency")
	flag.Parse()
	tmp, err := os.MkdirTemp("", "natsbench")
	check(err)
	defer os.RemoveAll(tmp)
	natsd := filepath.Join(tmp, "natsd")
	build := exec.Command("go", "build", "-o", natsd, "github.com/inbox-dev/inbox/internal/natsd")
	build.Stderr = os.Stderr
	check(build.Run())

	r1 := startServers(context.TODO(), natsd, tmp, "r1", 1)
	defer stop(r1)
	r3 := startServers(context.TODO(), natsd, tmp, "r3", 3)
	defer stop(r3)

	type backend struct {
		name string
		open func(store string) func() inbox.Bus // returns a connection maker
	}
	backends := []backend{
		{"directory (ext4)", func(store string) func() inbox.Bus {
			dir := filepath.Join(tmp, "dir-"+store)
			_, err := spool.Init(dir, false)
			check(err)
			return func() inbox.Bus {
				s, err := spool.Open(context.TODO(), dir, spool.Options{})
				check(err)
				return s
			}
		}},
		{"JetStream R1", natsOpener(context.TODO(), r1.url, "")},
		{"JetStream R3", natsOpener(context.TODO(), r3.url, "?replicas=3")},
	}
	fmt.Printf("| backend | send p50 / p99 | claim p50 / p99 | fetch p50 / p99 (1,000 threads) | wake p50 / p99 | claim race 8×200 | 16 senders |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, be := range backends {
		conn := be.open("lat")
		b := conn()
		_, err := b.Collect(context.TODO(), "w", "", false, 1) // w and X have acted before, as working agents have
		check(err)
		_, err = b.Collect(context.TODO(), "X", "", false, 1)
		check(err)
		var send, claim, fetch, wake []time.Duration
		var tids []string
		for i := 0; i < *n; i++ {
			t0 := time.Now()
			r, err := b.Send(context.TODO(), inbox.SendInput{From: "lead", To: "w", Subject: fmt.Sprint("job ", i), Content: inbox.Content{Body: "do it"}})
			send = append(send, time.Since(t0))
			check(err)
			tids = append(tids, r.Thread.ThreadID)
		}
		for _, tid := range tids {
			t0 := time.Now()
			_, err := b.Claim(context.TODO(), "w", tid, 600)
			claim = append(claim, time.Since(t0))
			check(err)
		}
		for i := len(tids); i < 1000; i++ {
			_, err := b.Send(context.TODO(), inbox.SendInput{From: "lead", To: fmt.Sprint("a", i%30), Subject: "filler", Content: inbox.Content{Body: "x"}})
			check(err)
		}
		for i := 0; i < 10; i++ {
			_, err := b.Send(context.TODO(), inbox.SendInput{From: "lead", To: "X", Subject: "for X", Content: inbox.Content{Body: "x"}})
			check(err)
		}
		for i := 0; i < *n; i++ {
			t0 := time.Now()
			_, err := b.Fetch(context.TODO(), "X", nil, 10, false)
			fetch = append(fetch, time.Since(t0))
			check(err)
		}
		waiter := conn()
		for i := 0; i < min(*n, 200); i++ {
			tid := tids[i]
			_, err := b.Update(context.TODO(), "w", tid, inbox.StatusBlocked, 0, inbox.Content{Summary: "which?"})
			check(err)
			last, err := b.LastEventID(context.TODO())
			check(err)
			done := make(chan time.Time, 1)
			go func() {
				res, err := waiter.WaitReply(contextBG(), tid, inbox.ReplyCursor{AfterEvent: last, HasEvent: true}, inbox.ReplyFilter{}, inbox.WaitOptions{Timeout: 10 * time.Second})
				check(err)
				if !res.Woke && os.Getenv("NATSBENCH_DEBUG") != "" {
					fmt.Fprintf(os.Stderr, "lost wake: thread %s after %d, next %d\n", tid, last, res.NextEventID)
				}
				done <- time.Now()
			}()
			time.Sleep(20 * time.Millisecond) // let the wait block (make its consumer) first
			t0 := time.Now()
			rr, err := b.Reply(context.TODO(), "lead", "", tid, inbox.KindAnswer, inbox.Content{Summary: "this"})
			check(err)
			if os.Getenv("NATSBENCH_DEBUG") != "" && time.Since(t0) > time.Second {
				fmt.Fprintf(os.Stderr, "slow reply %s event %d\n", tid, rr.Message.EventID)
			}
			wake = append(wake, (<-done).Sub(t0))
		}
		race := claimRace(context.TODO(), conn)
		tput := senders(context.TODO(), conn)
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s |\n", be.name, pct(send), pct(claim), pct(fetch), pct(wake), race, tput)
	}
}

func natsOpener(ctx context.Context, server, query string) func(store string) func() inbox.Bus {
	return func(store string) func() inbox.Bus {
		url := server + "/" + store + query
		b, err := natsbus.Open(ctx, url, natsbus.Options{Create: true})
		check(err)
		b.Close()
		return func() inbox.Bus {
			b, err := natsbus.Open(ctx, url, natsbus.Options{})
			check(err)
			return b
		}
	}
}

// claimRace: 8 connections race to claim each of 200 threads.
func claimRace(ctx context.Context, conn func() inbox.Bus) string {
	b := conn()
	var tids []string
	for i := 0; i < 200; i++ {
		r, err := b.Send(ctx, inbox.SendInput{From: "lead", To: "crowd", Subject: fmt.Sprint("race ", i), Content: inbox.Content{Body: "x"}})
		check(err)
		tids = append(tids, r.Thread.ThreadID)
	}
	conns := make([]inbox.Bus, 8)
	for i := range conns {
		conns[i] = conn()
	}
	wins := make([]atomic.Int32, len(tids))
	t0 := time.Now()
	var wg sync.WaitGroup
	for w, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, tid := range tids {
				if _, err := c.Claim(ctx, fmt.Sprint("crowd"+fmt.Sprint(w)), tid, 600); err == nil {
					wins[i].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	bad := 0
	for i := range wins {
		if wins[i].Load() != 1 {
			bad++
		}
	}
	return fmt.Sprintf("%.0f ms, %d threads without exactly one winner", float64(el.Microseconds())/1000, bad)
}

// senders: 16 connections send 100 messages each.
func senders(ctx context.Context, conn func() inbox.Bus) string {
	const n, each = 16, 100
	conns := make([]inbox.Bus, n)
	for i := range conns {
		conns[i] = conn()
	}
	// The sink has collected mail before, as a working agent has: a
	// send to an agent never seen also looks for close names to suggest.
	_, err := conns[0].Collect(ctx, "sink", "", false, 1)
	check(err)
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				_, err := c.Send(ctx, inbox.SendInput{From: fmt.Sprint("s", i), To: "sink", Content: inbox.Content{Body: fmt.Sprint("m", j)}})
				check(err)
			}
		}()
	}
	wg.Wait()
	return fmt.Sprintf("%.0f sends/s", float64(n*each)/time.Since(t0).Seconds())
}

func pct(d []time.Duration) string {
	slices.Sort(d)
	ms := func(x time.Duration) string { return fmt.Sprintf("%.3f", float64(x.Microseconds())/1000) }
	return ms(d[len(d)/2]) + " / " + ms(d[len(d)*99/100]) + " ms"
}

type servers struct {
	url   string
	procs []*exec.Cmd
}

func startServers(ctx context.Context, natsd, tmp, name string, nodes int) *servers {
	s := &servers{}
	base := 24000
	if name == "r3" {
		base = 25000
	}
	var routes []string
	for i := 0; i < nodes; i++ {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", base+100+i))
	}
	for i := 0; i < nodes; i++ {
		dir := filepath.Join(tmp, fmt.Sprintf("%s-n%d", name, i))
		ready := dir + ".ready"
		args := []string{"-port", fmt.Sprint(base + i), "-dir", dir, "-ready", ready}
		if nodes > 1 {
			args = append(args, "-name", fmt.Sprintf("%s-%d", name, i), "-cluster-port", fmt.Sprint(base+100+i), "-routes", strings.Join(routes, ","))
		}
		cmd := exec.Command(natsd, args...)
		check(cmd.Start())
		s.procs = append(s.procs, cmd)
		started = append(started, cmd)
		if i == 0 {
			s.url = fmt.Sprintf("nats://127.0.0.1:%d", base)
		}
	}
	for i := 0; i < nodes; i++ {
		waitFile(filepath.Join(tmp, fmt.Sprintf("%s-n%d", name, i)) + ".ready")
	}
	if nodes > 1 {
		// The cluster needs a meta leader before streams can be made.
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, err := natsbus.Open(ctx, s.url+"/probe?replicas=3", natsbus.Options{Create: true})
			if err == nil {
				b.Close()
				break
			}
			if time.Now().After(deadline) {
				check(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return s
}

func stop(s *servers) {
	for _, p := range s.procs {
		p.Process.Kill()
		p.Wait()
	}
}

func waitFile(p string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("%s did not appear", p))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// started are the servers to kill if the run fails.
var started []*exec.Cmd

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsbench:", err)
		for _, p := range started {
			p.Process.Kill()
		}
		os.Exit(1)
	}
}

func contextBG() context.Context { return context.Background() }
