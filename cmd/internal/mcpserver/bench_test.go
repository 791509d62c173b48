package mcpserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/benchstore"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// BenchmarkMCP measures, in one run and alternating, what an agent pays
// per tool call in a long-lived server (SPEC §9, issue 15's targets):
// send and claim against the durable-write floor (one JSON line appended
// and fdatasynced, as ../shared/bench's `floors append` measures it, in
// the same directory), show and fetch on a 10,000-thread store, and the
// wake from a CLI reply's exit to the MCP wait_reply's result. Each round
// does one of each; b.N is the number of rounds. It reports p50s (ms) and
// the ratios to the floor; each call's time is given in the server (from
// its decoded request to its result) and as a round trip through the
// SDK's in-memory transports with the client in this process:
//
//	go test ./cmd/internal/mcpserver -run XXX -bench MCP -benchtime 300x
//
// With MCP_BENCH_PROCESS=1 the server runs in its own process (inbox mcp
// over stdio) and only round trips are reported.
func BenchmarkMCP(b *testing.B) {
	dir := b.TempDir()
	db := filepath.Join(dir, "store")
	if err := benchstore.Fill(b.Context(), db, 10000, nil); err != nil {
		b.Fatal(err)
	}
	s, err := spool.Open(b.Context(), db, spool.Options{})
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, server := newMCPServer(s, db, "X", os.Getenv, false, log)
	// In-server time: from the server's decoded request to its result,
	// without the client's side of the in-memory transport.
	var inServer time.Duration
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			t0 := time.Now()
			r, err := next(ctx, method, req)
			if method == "tools/call" {
				inServer = time.Since(t0)
			}
			return r, err
		}
	})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if os.Getenv("MCP_BENCH_PROCESS") != "" {
		// The server in its own process, as an agent's client sees it.
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
			&mcp.CommandTransport{Command: exec.Command(testproc.Installed(b, "inbox"), "mcp", "--db", db, "--agent", "X")}, nil)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) map[string]any {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", name, err, res)
		}
		out, _ := res.StructuredContent.(map[string]any)
		return out
	}
	floor, err := os.OpenFile(filepath.Join(dir, "floor.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer floor.Close()
	line := []byte(`{"event_id":123456,"thread_id":"thr_0123456789abcdefghij","event_type":"message_created","message_id":"msg_0123456789abcdefghij","created_at":"2026-11-21T00:00:00.000000Z"}` + "\n")
	bin, err := exec.LookPath("inbox")
	if err != nil {
		b.Fatal(err)
	}
	// A thread to wake in, and one pending thread listed by fetch.
	w, err := s.Send(ctx, inbox.SendInput{From: "leader", To: "X", Subject: "wake here"})
	if err != nil {
		b.Fatal(err)
	}
	lat := map[string][]time.Duration{}
	timeIt := func(name string, f func()) {
		t0 := time.Now()
		f()
		lat[name] = append(lat[name], time.Since(t0))
		lat[name+"-server"] = append(lat[name+"-server"], inServer)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		timeIt("floor", func() {
			if _, err := floor.Write(line); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fdatasync(int(floor.Fd())); err != nil {
				b.Fatal(err)
			}
		})
		var tid string
		timeIt("send", func() {
			tid = call("send", map[string]any{"from": "boss", "to": "Y", "subject": fmt.Sprint("task ", i), "body": "do it"})["thread"].(map[string]any)["thread_id"].(string)
		})
		timeIt("claim", func() { call("claim", map[string]any{"agent": "Y", "thread": tid}) })
		timeIt("show", func() { call("show", map[string]any{"thread": w.Thread.ThreadID}) })
		timeIt("fetch", func() { call("fetch", map[string]any{"agent": "X", "limit": 10}) })
		if i%10 == 0 {
			// The wake: a reply from another process, whose exit is the
			// start; the wait_reply result the end.
			last, _ := s.LastEventID(ctx)
			got := make(chan time.Time, 1)
			go func() {
				call("wait_reply", map[string]any{"thread": w.Thread.ThreadID, "after_event": last, "max_wait_seconds": 10})
				got <- time.Now()
			}()
			time.Sleep(5 * time.Millisecond)
			cmd := exec.Command(bin, "reply", "--db", db, "--from", "leader", "--thread", w.Thread.ThreadID, "--kind", "answer", "--summary", "now")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("reply: %v %s", err, out)
			}
			exited := time.Now()
			lat["wake"] = append(lat["wake"], max(0, (<-got).Sub(exited)))
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	fl := p50(lat["floor"])
	b.ReportMetric(fl, "floor-p50-ms")
	process := os.Getenv("MCP_BENCH_PROCESS") != ""
	for _, op := range []string{"send", "claim", "show", "fetch"} {
		b.ReportMetric(p50(lat[op]), op+"-roundtrip-p50-ms")
		if !process {
			b.ReportMetric(p50(lat[op+"-server"]), op+"-server-p50-ms")
		}
	}
	b.ReportMetric(p50(lat["wake"]), "wake-p50-ms")
	if !process {
		b.ReportMetric(p50(lat["send-server"])/fl, "send/floor")
		b.ReportMetric(p50(lat["claim-server"])/fl, "claim/floor")
	}
	b.ReportMetric(0, "ns/op")
}
