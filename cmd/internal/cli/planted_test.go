package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/testproc"
)

// TestPlantedStoreFiles: a symbolic link, a FIFO or a socket planted in
// place of each kind of store file is never written or read through and
// never hangs a command (SPEC §8): every command a worker or a leader
// runs on the thread returns (whatever it answers), the link's target is
// untouched, fsck reports the planted file, and fsck --repair sets it
// aside and rebuilds what it stood in for, after which fsck is clean and
// the thread whole.
func TestPlantedStoreFiles(t *testing.T) {
	inboxBin := testproc.Installed(t, "inbox")
	files := []string{"cursor-w.log", "thread.log", "m-00000001.json", "m-00000002.json", "lease.json"}
	for _, file := range files {
		for _, plant := range testproc.PlantKinds {
			t.Run(file+"/"+plant, func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "db")
				run := func(timeout time.Duration, args ...string) (int, string) {
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					defer cancel()
					cmd := exec.CommandContext(ctx, inboxBin, append([]string{"--db", db, "--json"}, args...)...)
					var stderr strings.Builder
					cmd.Stderr = &stderr
					out, err := cmd.Output()
					if ctx.Err() != nil {
						t.Fatalf("inbox %s hung (killed after %s): %s", strings.Join(args, " "), timeout, out)
					}
					code, err := exitStatus(err)
					if err != nil {
						t.Fatal(err)
					}
					return code, string(out) + stderr.String()
				}
				must := func(args ...string) string {
					t.Helper()
					code, out := run(30*time.Second, args...)
					if code != 0 {
						t.Fatalf("inbox %s: exit %d: %s", strings.Join(args, " "), code, out)
					}
					return out
				}
				must("init")
				var sent struct {
					Thread struct {
						ThreadID string `json:"thread_id"`
					} `json:"thread"`
				}
				out := must("send", "--from", "boss", "--to", "w", "--subject", "job", "--body", "first body")
				json.Unmarshal([]byte(out[:strings.IndexByte(out, '\n')]), &sent)
				tid := sent.Thread.ThreadID
				must("claim", "--agent", "w", "--thread", tid)
				must("reply", "--from", "boss", "--to", "w", "--thread", tid, "--kind", "answer", "--summary", "go", "--body", "second body")
				must("show", "--thread", tid, "--mark-read", "--agent", "w")
				before := must("show", "--thread", tid)

				victim := filepath.Join(t.TempDir(), "victim")
				if err := os.WriteFile(victim, []byte("not the store's\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(db, "threads", tid, file)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				testproc.Plant(t, plant, p, victim)

				// Every command returns, whatever it answers.
				for _, args := range [][]string{
					{"show", "--thread", tid, "--mark-read", "--agent", "w"},
					{"fetch", "--agent", "w", "--unread", "--status", "pending,claimed,blocked"},
					{"wait-reply", "--thread", tid, "--agent", "w", "--timeout-seconds", "1"},
					{"update", "--agent", "w", "--thread", tid, "--status", "in_progress", "--summary", "working"},
					{"reply", "--from", "boss", "--to", "w", "--thread", tid, "--kind", "progress", "--summary", "ping"},
					{"list"},
					{"receive", "--agent", "w", "--timeout-seconds", "1"},
				} {
					run(30*time.Second, args...)
				}
				if b, _ := os.ReadFile(victim); string(b) != "not the store's\n" {
					t.Fatalf("written through the planted %s: the target now holds %q", plant, b)
				}
				code, out := run(60*time.Second, "fsck")
				want := map[string]string{"symlink": `"check":"symlink"`, "fifo": `"check":"planted_file"`, "socket": `"check":"planted_file"`}[plant]
				if code != 50 || !strings.Contains(out, want) {
					t.Fatalf("fsck should report the planted %s (%s): exit %d: %s", plant, want, code, out)
				}
				if code, out := run(60*time.Second, "fsck", "--repair"); code != 0 {
					t.Fatalf("fsck --repair: exit %d: %s", code, out)
				}
				must("fsck")
				if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
					t.Fatalf("%s is still a %s after the repair", p, fi.Mode())
				}
				after := must("show", "--thread", tid)
				for _, body := range []string{"first body", "second body"} {
					if strings.Contains(before, body) && !strings.Contains(after, body) {
						t.Errorf("%q lost by the repair: %s", body, after)
					}
				}
				must("reply", "--from", "boss", "--to", "w", "--thread", tid, "--kind", "progress", "--summary", "after")
			})
		}
	}
}

// TestPlantedPresence: a symbolic link, a FIFO or a socket planted in
// presence/<agent>/ as a wait file, or as presence/<agent> itself, hangs
// none of the commands that read presence (SPEC §8). agents, and receive,
// wait-reply and watch for that agent with a short timeout, each run as a
// process whose wait is bounded by a deadline (its own timeout and 10 s
// to start: a hang fails with a message saying so, not the test's
// timeout), answer what they answer without it: the same exit status and
// the same output but for the times of activity. A receive with no
// timeout waits beside the planted wait file, shows as waiting, and the
// first SIGTERM ends it (143). fsck reports the planted file (50) as it
// reports any other, --repair sets it aside, fsck is clean after it, and
// the commands answer as before.
func TestPlantedPresence(t *testing.T) {
	inboxBin := testproc.Installed(t, "inbox")
	for _, where := range []string{"wait-file", "agent-dir"} {
		for _, plant := range testproc.PlantKinds {
			t.Run(where+"/"+plant, func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "db")
				var p string // the planted file
				// run runs inbox with args, killing it (and failing the
				// test) once its own timeout and 10 s have passed.
				run := func(timeout time.Duration, args ...string) (int, string) {
					t.Helper()
					deadline := timeout + 10*time.Second
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					defer cancel()
					cmd := exec.CommandContext(ctx, inboxBin, append([]string{"--db", db, "--json"}, args...)...)
					var stderr strings.Builder
					cmd.Stderr = &stderr
					out, err := cmd.Output()
					if ctx.Err() != nil {
						t.Fatalf("inbox %s hung on the %s planted at %s: no exit %s after it started (its own timeout: %v); killed: %s",
							strings.Join(args, " "), plant, p, deadline, timeout, out)
					}
					code, err := exitStatus(err)
					if err != nil {
						t.Fatal(err)
					}
					return code, string(out) + stderr.String()
				}
				if code, out := run(0, "init"); code != 0 {
					t.Fatalf("init: %d %s", code, out)
				}
				code, out := run(0, "send", "--from", "boss", "--to", "w", "--subject", "job")
				if code != 0 {
					t.Fatalf("send: %d %s", code, out)
				}
				var sent struct {
					Thread struct {
						ThreadID string `json:"thread_id"`
					} `json:"thread"`
				}
				json.Unmarshal([]byte(out[:strings.IndexByte(out, '\n')]), &sent)
				run(0, "receive", "--agent", "w", "--timeout-seconds", "0") // the job: nothing waits after it
				const short = 500 * time.Millisecond
				commands := [][]string{
					{"agents"},
					{"receive", "--agent", "w", "--timeout-seconds", "0.5"},
					{"wait-reply", "--thread", sent.Thread.ThreadID, "--agent", "w", "--timeout-seconds", "0.5"},
					{"watch", "--agent", "w", "--timeout-seconds", "0.5"},
				}
				type answer struct {
					code int
					out  string
				}
				// ask runs a command and returns its answer without the
				// times of activity, which every wait moves.
				ask := func(args []string) answer {
					t.Helper()
					timeout := short
					if args[0] == "agents" {
						timeout = 0 // it does not wait
					}
					code, out := run(timeout, args...)
					var v any
					if err := json.Unmarshal([]byte(out[:strings.IndexByte(out+"\n", '\n')]), &v); err != nil {
						t.Fatalf("inbox %s: exit %d, no JSON answer: %s", strings.Join(args, " "), code, out)
					}
					var strip func(v any)
					strip = func(v any) {
						switch v := v.(type) {
						case map[string]any:
							delete(v, "last_seen")
							delete(v, "last_activity")
							for _, e := range v {
								strip(e)
							}
						case []any:
							for _, e := range v {
								strip(e)
							}
						}
					}
					strip(v)
					b, _ := json.Marshal(v)
					return answer{code, string(b)}
				}
				// What each answers with presence as inbox wrote it.
				want := map[string]answer{}
				for _, args := range commands {
					want[args[0]] = ask(args)
				}

				victimDir := t.TempDir()
				victim := filepath.Join(victimDir, "4242-1.wait")
				if err := os.WriteFile(victim, []byte(`{"agent":"w","reason":"receive"}`), 0o600); err != nil {
					t.Fatal(err)
				}
				p = filepath.Join(db, "presence", "w", "4242-1.wait")
				target := victim
				if where == "agent-dir" {
					p, target = filepath.Join(db, "presence", "w"), victimDir
					os.RemoveAll(p)
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				testproc.Plant(t, plant, p, target)

				check := func(when string) {
					t.Helper()
					for _, args := range commands {
						if got := ask(args); got != want[args[0]] {
							t.Errorf("inbox %s %s: exit %d %s, want exit %d %s as without it",
								strings.Join(args, " "), when, got.code, got.out, want[args[0]].code, want[args[0]].out)
						}
					}
				}
				check("with the planted " + plant)
				if where == "wait-file" {
					// A receive that waits for good, beside the planted
					// file: it registers its wait, shows as waiting, and
					// the first SIGTERM ends it.
					cmd := exec.Command(inboxBin, "--db", db, "--json", "receive", "--agent", "w")
					testproc.Start(t, cmd)
					registered := testproc.Poll(10*time.Second, func() bool {
						entries, _ := os.ReadDir(filepath.Dir(p))
						for _, e := range entries {
							if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".wait") && !strings.HasPrefix(e.Name(), ".") {
								return true
							}
						}
						return false
					})
					if !registered {
						t.Fatalf("a receive beside the %s planted at %s did not register its wait within 10 s (stuck on the planted file)", plant, p)
					}
					if code, out := run(0, "agents"); code != 0 || !strings.Contains(out, `"agent":"w","state":"waiting"`) {
						t.Errorf("agents should show w waiting beside the planted %s: exit %d: %s", plant, code, out)
					}
					cmd.Process.Signal(syscall.SIGTERM)
					ended := make(chan error, 1)
					go func() { ended <- cmd.Wait() }()
					select {
					case err := <-ended:
						if code, _ := exitStatus(err); code != 143 {
							t.Errorf("receive after one SIGTERM: exit %d (%v), want 143", code, err)
						}
					case <-time.After(10 * time.Second):
						t.Fatalf("one SIGTERM did not end a receive waiting beside the %s planted at %s within 10 s", plant, p)
					}
				}
				if names, _ := os.ReadDir(victimDir); len(names) != 1 {
					t.Errorf("a wait was made through the planted link: %v", names)
				}
				code, out = run(0, "fsck")
				kind := map[string]string{"symlink": `"check":"symlink"`, "fifo": `"check":"planted_file"`, "socket": `"check":"planted_file"`}[plant]
				if code != 50 || !strings.Contains(out, kind) || !strings.Contains(out, p) {
					t.Fatalf("fsck should report the planted %s at %s (%s): exit %d: %s", plant, p, kind, code, out)
				}
				if code, out := run(0, "fsck", "--repair"); code != 0 || !strings.Contains(out, `"repaired":true`) {
					t.Fatalf("fsck --repair: exit %d: %s", code, out)
				}
				if _, err := os.Lstat(p); !os.IsNotExist(err) {
					t.Fatalf("%s is still there after the repair: %v", p, err)
				}
				if code, out := run(0, "fsck"); code != 0 {
					t.Fatalf("fsck after the repair: exit %d: %s", code, out)
				}
				check("after the repair")
			})
		}
	}
}
