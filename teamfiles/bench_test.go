package teamfiles

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// BenchmarkTeamFiles measures the bridges (SPEC §11, issue 16): a burst of
// 1,000 lines appended to one member's JSONL inbox at once until all are
// in the store, 1,000 sends until all are in the file, the same for Claude
// Code's format, and the latency of one message each way (p50 of b.N):
//
//	go test ./teamfiles -run XXX -bench TeamFiles -benchtime 20x
func BenchmarkTeamFiles(b *testing.B) {
	const burst = 1000
	s, _ := storetest.New(b, spool.Options{})
	jdir, cdir := b.TempDir(), b.TempDir()
	s.CreateTeam(b.Context(), "lead", "alpha", []string{"a", "b"})
	writeConfig(b, cdir, "beta", "lead", "c")
	// The waits look again after each step of either bridge's loop.
	st := newSteps()
	startBridge(b, RunJSONL, Config{Bus: s, Dir: jdir, MaxSize: 1 << 30, step: st.step})
	startBridge(b, RunClaude, Config{Bus: s, Dir: cdir, step: st.step})
	inboxB := filepath.Join(jdir, "alpha", "members", "b", "inbox")
	waitUntil := func(limit time.Duration, cond func() bool) time.Duration {
		return st.within(b, limit, "the bridges", func(progress) bool { return cond() })
	}
	mailFrom := func(agent, from string) int { items, _ := s.Mailbox(b.Context(), agent, from); return len(items) }
	b.ResetTimer()
	// One message each way, b.N times.
	var out, in, cout, cin []time.Duration
	for i := 0; i < b.N; i++ {
		before := countLinesB(inboxB)
		t0 := time.Now()
		s.Send(b.Context(), inbox.SendInput{From: "a", To: "b", Content: inbox.Content{Body: fmt.Sprint("lat", i)}})
		waitUntil(5*time.Second, func() bool { return countLinesB(inboxB) > before })
		out = append(out, time.Since(t0))
		n := mailFrom("b", "c")
		t0 = time.Now()
		appendFile(inboxB, fmt.Sprintf(`{"type":"message","from":"c","to":"b","timestamp":"t%d","content":{"text":"in%d"}}`+"\n", i, i))
		waitUntil(5*time.Second, func() bool { return mailFrom("b", "c") > n })
		in = append(in, time.Since(t0))
		cp := filepath.Join(cdir, "beta", "inboxes", "c.json")
		ce := len(readEntriesB(cp))
		t0 = time.Now()
		s.Send(b.Context(), inbox.SendInput{From: "lead", To: "c", Content: inbox.Content{Body: fmt.Sprint("clat", i)}})
		waitUntil(5*time.Second, func() bool { return len(readEntriesB(cp)) > ce })
		cout = append(cout, time.Since(t0))
		n = mailFrom("inbox", "c")
		t0 = time.Now()
		own := filepath.Join(cdir, "beta", "inboxes", "inbox.json")
		unlock, _ := lockFile(own)
		es, _ := readEntries(own)
		writeEntries(own, append(es, &claudeEntry{From: "c", Text: fmt.Sprint("cin", i), Timestamp: fmt.Sprint(i)}))
		unlock()
		waitUntil(5*time.Second, func() bool { return mailFrom("inbox", "c") > n })
		cin = append(cin, time.Since(t0))
	}
	// The bursts.
	var lines strings.Builder
	for i := range burst {
		fmt.Fprintf(&lines, `{"type":"message","from":"a","to":"b","timestamp":"burst","content":{"text":"burst %d"}}`+"\n", i)
	}
	n := mailFrom("b", "a")
	appendFile(inboxB, lines.String())
	inBurst := waitUntil(30*time.Second, func() bool { return mailFrom("b", "a") >= n+burst })
	before := countLinesB(inboxB)
	t0 := time.Now()
	for i := range burst {
		s.Send(b.Context(), inbox.SendInput{From: "a", To: "b", Content: inbox.Content{Body: fmt.Sprint("sent ", i)}})
	}
	sent := time.Since(t0)
	waitUntil(30*time.Second, func() bool { return countLinesB(inboxB) >= before+burst })
	outBurst := time.Since(t0)
	cp := filepath.Join(cdir, "beta", "inboxes", "c.json")
	ce := len(readEntriesB(cp))
	t0 = time.Now()
	for i := range burst {
		s.Send(b.Context(), inbox.SendInput{From: "lead", To: "c", Content: inbox.Content{Body: fmt.Sprint("csent ", i)}})
	}
	waitUntil(60*time.Second, func() bool { return len(readEntriesB(cp)) >= ce+burst })
	cOutBurst := time.Since(t0)
	own := filepath.Join(cdir, "beta", "inboxes", "inbox.json")
	n = mailFrom("inbox", "lead")
	unlock, _ := lockFile(own)
	es, _ := readEntries(own)
	for i := range burst {
		es = append(es, &claudeEntry{From: "lead", Text: fmt.Sprint("cburst ", i), Timestamp: "b"})
	}
	writeEntries(own, es)
	unlock()
	cInBurst := waitUntil(60*time.Second, func() bool { return mailFrom("inbox", "lead") >= n+burst })
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p50 := func(d []time.Duration) float64 { d = slices.Clone(d); slices.Sort(d); return ms(d[len(d)/2]) }
	b.ReportMetric(p50(out), "jsonl-out-p50-ms")
	b.ReportMetric(p50(in), "jsonl-in-p50-ms")
	b.ReportMetric(p50(cout), "claude-out-p50-ms")
	b.ReportMetric(p50(cin), "claude-in-p50-ms")
	b.ReportMetric(ms(inBurst), "jsonl-in-1000-ms")
	b.ReportMetric(ms(outBurst), "jsonl-out-1000-ms")
	b.ReportMetric(ms(sent), "sends-1000-ms")
	b.ReportMetric(ms(cOutBurst), "claude-out-1000-ms")
	b.ReportMetric(ms(cInBurst), "claude-in-1000-ms")
	b.ReportMetric(0, "ns/op")
}

func appendFile(p, s string) {
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	f.WriteString(s)
	f.Close()
}

func countLinesB(p string) int {
	data, _ := os.ReadFile(p)
	return strings.Count(string(data), "\n")
}

func readEntriesB(p string) []*claudeEntry {
	es, _ := readEntries(p)
	return es
}
