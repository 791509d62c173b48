//go:build long

package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// The long tests: too long for the README's go test ./... (they move
// gigabytes), run by .ci/run's separate long step with -tags long.

// TestTaskOutputSizes: 200 tasks whose outputs range from 0 B to 100 MiB
// (text and binary, inline and past the 64 MiB inline limit), and
// failures with up to 10 MiB of partial output, each deliver exactly one
// message to the parent, byte-identical (SHA-256) whether inline or as a
// blob; none stays running; fsck is clean.
func TestTaskOutputSizes(t *testing.T) {
	inbox := testproc.Installed(t, "inbox")
	helper := testproc.Installed(t, "inbox-test-helper")
	db := filepath.Join(t.TempDir(), "db")
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(inbox, append([]string{"--db", db}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("inbox %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	run("init")
	type spec struct {
		size, seed int64
		code       int
	}
	r := rand.New(rand.NewPCG(42, 42))
	fixed := []int64{0, 1, 4095, 1 << 20, 64<<20 - 1, 64 << 20, 64<<20 + 1, 100 << 20}
	specs := map[string]spec{}
	for i := range 200 {
		var sp spec
		switch {
		case i < len(fixed):
			sp.size = fixed[i]
		default:
			// Log-uniform from 1 B to 100 MiB: most small, a few large.
			sp.size = int64(math.Pow(100<<20, r.Float64()))
		}
		sp.seed = int64(i + 1)
		if i%17 == 5 {
			sp.seed = -sp.seed // binary output: always a blob
		}
		if i%10 == 3 {
			sp.code = 1 + i%5
			sp.size = min(sp.size, 10<<20) // failures: up to 10 MiB of partial output
		}
		name := fmt.Sprintf("t%03d", i)
		specs[name] = sp
		cmd := exec.Command(inbox, "--db", db, "push", "--name", name, "-")
		cmd.Stdin = strings.NewReader(fmt.Sprintf("%d %d %d\n", sp.size, sp.seed, sp.code))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("push %s: %v\n%s", name, err, out)
		}
	}
	run("run", "2", "--exec", shq(helper)+" emit")

	deadline := time.Now().Add(8 * time.Minute)
	got := map[string]bool{}
	for len(got) < len(specs) && time.Now().Before(deadline) {
		cmd := exec.Command(inbox, "--db", db, "receive", "--json", "--timeout-seconds", "60")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("receive after %d results: %v\n%s", len(got), err, out)
		}
		var res struct {
			Message struct {
				From      string          `json:"from_agent"`
				Body      string          `json:"body"`
				Payload   json.RawMessage `json:"payload_json"`
				Artifacts []struct {
					Path string `json:"path"`
					Kind string `json:"kind"`
					Meta struct {
						Field  string `json:"field"`
						SHA256 string `json:"sha256"`
						Bytes  int64  `json:"bytes"`
					} `json:"metadata_json"`
				} `json:"artifacts"`
			} `json:"message"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("receive: %v\n%.300s", err, out)
		}
		m := res.Message
		sp, ok := specs[m.From]
		if !ok {
			t.Fatalf("a message from %q, which is no task", m.From)
		}
		if got[m.From] {
			t.Fatalf("a second message from %s", m.From)
		}
		got[m.From] = true
		if testing.Verbose() {
			t.Logf("%s %s: %d bytes", time.Now().Format("15:04:05.000"), m.From, sp.size)
		}
		want := sha256.New()
		taskOutput(want, sp.size, sp.seed)
		wantSum := hex.EncodeToString(want.Sum(nil))
		// The output: inline (body, or partial_output in the payload), or
		// the blob an artifact names.
		var text string
		if sp.code == 0 {
			text = m.Body
		} else {
			var p struct {
				Success bool   `json:"success"`
				Partial string `json:"partial_output"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil || p.Success {
				t.Fatalf("%s failed with %d: payload %.200s", m.From, sp.code, m.Payload)
			}
			text = p.Partial
		}
		sum := sha256.Sum256([]byte(text))
		gotSum := hex.EncodeToString(sum[:])
		for _, a := range m.Artifacts {
			if a.Kind != "blob" {
				continue
			}
			f, err := os.Open(a.Path)
			if err != nil {
				t.Fatalf("%s: the blob of its output: %v", m.From, err)
			}
			h := sha256.New()
			n, _ := io.Copy(h, f)
			f.Close()
			gotSum = hex.EncodeToString(h.Sum(nil))
			if gotSum != a.Meta.SHA256 || n != a.Meta.Bytes {
				t.Fatalf("%s: blob %s holds %d bytes %s, its artifact says %d bytes %s", m.From, a.Path, n, gotSum, a.Meta.Bytes, a.Meta.SHA256)
			}
			if text != "" {
				t.Fatalf("%s: output both inline and as a blob", m.From)
			}
		}
		if gotSum != wantSum {
			t.Fatalf("%s (%d bytes, seed %d, exit %d): delivered output %s, want %s", m.From, sp.size, sp.seed, sp.code, gotSum, wantSum)
		}
		inline := sp.seed > 0 && sp.size <= 64<<20
		if inline != (len(m.Artifacts) == 0) {
			t.Errorf("%s (%d bytes, seed %d): inline %v, artifacts %d", m.From, sp.size, sp.seed, inline, len(m.Artifacts))
		}
	}
	if len(got) != len(specs) {
		t.Fatalf("%d of %d tasks delivered", len(got), len(specs))
	}
	// Exactly one each: nothing more arrives, and no task is running.
	cmd := exec.Command(inbox, "--db", db, "check", "--json")
	if out, err := cmd.Output(); err == nil {
		t.Fatalf("more messages after one per task:\n%.300s", out)
	}
	var q struct {
		Running  []any `json:"running"`
		Finished []any `json:"finished"`
	}
	json.Unmarshal(run("queue", "--json"), &q)
	if len(q.Running) != 0 || len(q.Finished) != len(specs) {
		t.Fatalf("queue: %d running, %d finished; want 0 and %d", len(q.Running), len(q.Finished), len(specs))
	}
	var fsck struct {
		OK       bool  `json:"ok"`
		Findings []any `json:"findings"`
	}
	json.Unmarshal(run("fsck", "--json"), &fsck)
	if !fsck.OK || len(fsck.Findings) > 0 {
		t.Fatalf("fsck: %+v", fsck)
	}
}
