package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// memoryBody is the size of the body TestMemoryLargeBody sends: close to
// the largest stored inline (64 MiB), where every copy a command makes
// shows in its peak memory.
const memoryBody = 60 << 20

// TestMemoryLargeBody runs the real binary on a store holding one 60 MB
// body and holds each command's peak resident memory (getrusage's
// maxrss) to what it needs: a command that reads only headers (list,
// fetch) never reads the body, and one that carries the body (send,
// show) holds it at most twice, plus the runtime.
//
// Each command is started by a helper process (this test binary,
// freshly started, running TestMemoryRSSHelper), not by the test: a
// child started with vfork inherits, when it execs, the high-water mark
// of the memory it shared, which is the test process's own.
func TestMemoryLargeBody(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 60 MB body several times")
	}
	if raceEnabled {
		t.Skip("the race detector's memory is not inbox's")
	}
	bin := testproc.Installed(t, "inbox")
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "body.txt")
	writeTextBody(t, bodyFile, memoryBody)

	const mb = 1 << 20
	twice := int64(2*memoryBody + 30*mb)
	outFile := filepath.Join(dir, "out")
	run := func(name string, limit int64, db, stdin string, args ...string) []byte {
		t.Helper()
		rss, took, err := peakRSS(t, dir, stdin, outFile, bin, append([]string{"--db", db}, args...)...)
		if err != nil {
			msg, _ := os.ReadFile(outFile + ".err")
			t.Fatalf("%s: %v\n%s", name, err, msg)
		}
		t.Logf("%-32s peak RSS %6.1f MB  %6.2f s", name, float64(rss)/mb, took.Seconds())
		if limit > 0 && rss > limit {
			t.Errorf("%s: peak RSS %.1f MB, want at most %.1f MB", name, float64(rss)/mb, float64(limit)/mb)
		}
		out, err := os.ReadFile(outFile)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Each send of the body goes to a store of its own: what it costs is
	// the body's, not that of the store's last event (see the last send).
	store := func(name string) string {
		db := filepath.Join(dir, name)
		run("init", 0, db, "", "init")
		return db
	}
	db := store("json")
	out := run("send --body-file F --json", twice, db, "", "send", "--from", "boss", "--to", "X", "--subject", "big", "--body-file", bodyFile, "--json")
	var sent struct {
		Thread struct {
			ThreadID string `json:"thread_id"`
		} `json:"thread"`
		Message struct {
			Body string `json:"body"`
		} `json:"message"`
	}
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatalf("send --json: %v", err)
	}
	if len(sent.Message.Body) != memoryBody {
		t.Fatalf("send stored a body of %d bytes, want %d (inline)", len(sent.Message.Body), memoryBody)
	}
	tid := sent.Thread.ThreadID
	run("send --body-file F", twice, store("human"), "", "send", "--from", "boss", "--to", "Y", "--subject", "big", "--body-file", bodyFile)
	run("send --body-file - < F", twice, store("stdin"), bodyFile, "send", "--from", "boss", "--to", "Z", "--subject", "big", "--body-file", "-")
	out = run("show", twice, db, "", "show", "--thread", tid)
	if len(out) < memoryBody {
		t.Fatalf("show printed %d bytes, want the body's %d and more", len(out), memoryBody)
	}
	out = run("show --json", twice, db, "", "show", "--thread", tid, "--json")
	var shown struct {
		Messages []struct {
			Body string `json:"body"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(out, &shown); err != nil || len(shown.Messages) != 1 || len(shown.Messages[0].Body) != memoryBody {
		t.Fatalf("show --json did not return the body whole (%v)", err)
	}
	if want, _ := os.ReadFile(bodyFile); shown.Messages[0].Body != string(want) {
		t.Fatal("show --json returned another body than was sent")
	}
	run("list", 30*mb, db, "", "list")
	run("fetch", 30*mb, db, "", "fetch", "--agent", "X")
	run("fsck", 0, db, "", "fsck")
	// Reported, not held to a bound here: a write after the 60 MB event
	// reads the log's last line whole to learn the last event id.
	run("send (after the 60 MB event)", 0, db, "", "send", "--from", "boss", "--to", "X", "--subject", "small", "--body", "hi")
}

// peakRSS runs name with args through TestMemoryRSSHelper, stdin from the
// file stdin (none when empty), stdout to the file out and stderr to
// out.err, and
// returns the command's peak resident memory in bytes and how long it
// ran; err is its failure.
func peakRSS(t *testing.T, dir, stdin, out, name string, args ...string) (rss int64, took time.Duration, err error) {
	t.Helper()
	spec, _ := json.Marshal(rssSpec{Args: append([]string{name}, args...), Stdin: stdin, Out: out})
	report := filepath.Join(dir, "rss.json")
	helper := exec.Command(os.Args[0], "-test.run=^TestMemoryRSSHelper$")
	helper.Env = append(os.Environ(), "INBOX_RSS_SPEC="+string(spec), "INBOX_RSS_REPORT="+report, "INBOX_TEST_NATS=", "INBOX_AGENT=")
	if b, err := helper.CombinedOutput(); err != nil {
		t.Fatalf("rss helper: %v\n%s", err, b)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r rssReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Err != "" {
		return r.MaxRSS, r.Took, errors.New(r.Err)
	}
	return r.MaxRSS, r.Took, nil
}

type rssSpec struct {
	Args       []string
	Stdin, Out string
}

type rssReport struct {
	MaxRSS int64
	Took   time.Duration
	Err    string
}

// TestMemoryRSSHelper is the helper process of peakRSS: it runs the
// command INBOX_RSS_SPEC describes and writes its peak memory to the
// file INBOX_RSS_REPORT.
func TestMemoryRSSHelper(t *testing.T) {
	specJSON := os.Getenv("INBOX_RSS_SPEC")
	if specJSON == "" {
		t.Skip("the helper process of TestMemoryLargeBody")
	}
	var spec rssSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(spec.Args[0], spec.Args[1:]...)
	if spec.Stdin != "" {
		f, err := os.Open(spec.Stdin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	out, err := os.Create(spec.Out)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errOut, err := os.Create(spec.Out + ".err")
	if err != nil {
		t.Fatal(err)
	}
	defer errOut.Close()
	cmd.Stdout, cmd.Stderr = out, errOut
	start := time.Now()
	err = cmd.Run()
	r := rssReport{Took: time.Since(start)}
	if cmd.ProcessState != nil {
		r.MaxRSS = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024 // kilobytes on Linux
	}
	if err != nil {
		r.Err = err.Error()
	}
	data, _ := json.Marshal(r)
	if err := os.WriteFile(os.Getenv("INBOX_RSS_REPORT"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeTextBody writes size bytes of text in lines of 76 characters, as
// a base64 dump or a log would be: every line ends in a newline, which
// JSON escapes.
func writeTextBody(t *testing.T, path string, size int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	r := rand.New(rand.NewPCG(1, 2))
	line := make([]byte, 77)
	for n := 0; n < size; n += len(line) {
		for i := range 76 {
			line[i] = alphabet[r.IntN(64)]
		}
		line[76] = '\n'
		w.Write(line[:min(len(line), size-n)])
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
