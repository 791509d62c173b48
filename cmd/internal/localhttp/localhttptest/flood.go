// Package localhttptest is what the tests of the two HTTP servers share
// to check their connection limits: processes that hold thousands of
// connections open to a server, as a local user without the token can.
// Only tests import it.
package localhttptest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// HolderCommand is the name a test binary's TestMain installs HolderMain
// under (testscript.Main).
const HolderCommand = "conn-holder"

// holders is how many processes share a flood, each with a loopback
// source address of its own (127.0.0.2, …): a process stays below an
// ordinary limit of open files, and an address below its number of
// ephemeral ports.
const holders = 4

// Flood keeps n connections open to addr (HOST:PORT) until tb ends, from
// holder processes: each connection sends request (a whole HTTP request,
// with no token), reads its answer and then holds the connection idle; a
// connection the server closes is opened again at once. It returns once
// every connection has been tried once, saying in tb's log how many were
// open and answered then.
func Flood(tb testing.TB, addr string, n int, request string) {
	tb.Helper()
	bin := testproc.Installed(tb, HolderCommand)
	type holder struct {
		cmd    *exec.Cmd
		ready  chan string
		stderr *lockedWriter
	}
	var hs []*holder
	for i := range holders {
		count := n / holders
		if i < n%holders {
			count++
		}
		cmd := exec.Command(bin, addr, "127.0.0."+strconv.Itoa(2+i), strconv.Itoa(count))
		cmd.Stdin = strings.NewReader(request)
		out, err := cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		h := &holder{cmd: cmd, ready: make(chan string, 1), stderr: &lockedWriter{}}
		cmd.Stderr = h.stderr
		testproc.Start(tb, cmd)
		go func() {
			sc := bufio.NewScanner(out)
			if sc.Scan() {
				h.ready <- sc.Text()
			}
			close(h.ready)
			io.Copy(io.Discard, out)
		}()
		hs = append(hs, h)
	}
	open, answered := 0, 0
	for i, h := range hs {
		select {
		case line, ok := <-h.ready:
			var o, a int
			if _, err := fmt.Sscanf(line, "ready %d %d", &o, &a); !ok || err != nil {
				tb.Fatalf("connection holder %d: %q (%v); stderr:\n%s", i, line, err, h.stderr)
			}
			open, answered = open+o, answered+a
		case <-time.After(5 * time.Minute):
			tb.Fatalf("connection holder %d did not try its connections within 5 minutes", i)
		}
	}
	tb.Logf("%d connections tried to %s: %d open once tried, %d answered", n, addr, open, answered)
}

type lockedWriter struct {
	mu sync.Mutex
	w  strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// HolderMain is conn-holder ADDR SOURCE N, the request on stdin: it keeps
// N connections from SOURCE (a loopback address) to ADDR, each sending
// the request, reading the answer and then holding the connection until
// the server closes it, when it opens another. Once each connection has
// been tried it prints "ready OPEN ANSWERED"; it runs until killed.
func HolderMain() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: conn-holder ADDR SOURCE N < request")
		os.Exit(2)
	}
	addr, source := os.Args[1], os.Args[2]
	n, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "conn-holder: N:", err)
		os.Exit(2)
	}
	request, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conn-holder: request:", err)
		os.Exit(2)
	}
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	var tried sync.WaitGroup
	var open, answered atomic.Int64
	for range n {
		tried.Add(1)
		go func() {
			first := true
			for {
				ok := hold(d, addr, request, func(o, a bool) {
					if first {
						if o {
							open.Add(1)
						}
						if a {
							answered.Add(1)
						}
						first = false
						tried.Done()
					}
				})
				if !ok {
					time.Sleep(100 * time.Millisecond) // a dial refused: try again, not in a spin
				}
			}
		}()
	}
	tried.Wait()
	fmt.Printf("ready %d %d\n", open.Load(), answered.Load())
	select {}
}

// hold opens one connection, sends request and reads the answer (giving
// up on it after a while: a server that no longer accepts does not
// answer), reports with first, then reads until the server closes it.
func hold(d net.Dialer, addr string, request []byte, first func(open, answered bool)) (opened bool) {
	c, err := d.Dial("tcp", addr)
	if err != nil {
		first(false, false)
		return false
	}
	defer c.Close()
	if _, err := c.Write(request); err != nil {
		first(true, false)
		return true
	}
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	answered := err == nil
	if answered {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	first(true, answered)
	c.SetReadDeadline(time.Time{})
	io.Copy(io.Discard, br) // until the server closes it
	return true
}

// OwnerRequest sends the request newRequest makes, each time on a new
// connection, until it is answered, and returns the answer's status and
// body; it fails tb when none comes within a generous minute. A try the
// server closes before answering (a newcomer took its place) is tried
// again; one the server never takes from its queue is not answered.
func OwnerRequest(tb testing.TB, newRequest func() *http.Request) (int, string) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	tries := 0
	for {
		tries++
		tr := &http.Transport{DisableKeepAlives: true}
		c := &http.Client{Transport: tr, Timeout: time.Until(deadline)}
		resp, err := c.Do(newRequest())
		if err == nil {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			tr.CloseIdleConnections()
			if err == nil {
				tb.Logf("the owner's request was answered (%d) at try %d", resp.StatusCode, tries)
				return resp.StatusCode, string(b)
			}
		}
		tr.CloseIdleConnections()
		if time.Now().After(deadline) {
			tb.Fatalf("the owner's request with the token got no answer within a minute (%d tries): %v", tries, err)
		}
	}
}
