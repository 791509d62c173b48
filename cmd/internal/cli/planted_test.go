package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// none of the commands that read presence (SPEC §8): agents, and
// receive, wait-reply and watch for that agent, each run as a process
// with a deadline, answer as they do without it (the waits time out
// with 10). fsck reports it (50), --repair sets it aside, and fsck is
// clean after it.
func TestPlantedPresence(t *testing.T) {
	inboxBin := testproc.Installed(t, "inbox")
	for _, where := range []string{"wait-file", "agent-dir"} {
		for _, plant := range testproc.PlantKinds {
			t.Run(where+"/"+plant, func(t *testing.T) {
				db := filepath.Join(t.TempDir(), "db")
				run := func(args ...string) (int, string) {
					t.Helper()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					cmd := exec.CommandContext(ctx, inboxBin, append([]string{"--db", db, "--json"}, args...)...)
					var stderr strings.Builder
					cmd.Stderr = &stderr
					out, err := cmd.Output()
					if ctx.Err() != nil {
						t.Fatalf("inbox %s hung on the planted %s (killed after 20 s): %s", strings.Join(args, " "), plant, out)
					}
					code, err := exitStatus(err)
					if err != nil {
						t.Fatal(err)
					}
					return code, string(out) + stderr.String()
				}
				if code, out := run("init"); code != 0 {
					t.Fatalf("init: %d %s", code, out)
				}
				code, out := run("send", "--from", "boss", "--to", "w", "--subject", "job")
				if code != 0 {
					t.Fatalf("send: %d %s", code, out)
				}
				var sent struct {
					Thread struct {
						ThreadID string `json:"thread_id"`
					} `json:"thread"`
				}
				json.Unmarshal([]byte(out[:strings.IndexByte(out, '\n')]), &sent)
				run("receive", "--agent", "w", "--timeout-seconds", "0") // the job: nothing waits after it
				commands := [][]string{
					{"agents"},
					{"receive", "--agent", "w", "--timeout-seconds", "0.5"},
					{"wait-reply", "--thread", sent.Thread.ThreadID, "--agent", "w", "--timeout-seconds", "0.5"},
					{"watch", "--agent", "w", "--timeout-seconds", "0.5"},
				}
				// What each answers with presence as inbox wrote it.
				want := map[string]int{}
				for _, args := range commands {
					want[args[0]], _ = run(args...)
				}

				victimDir := t.TempDir()
				victim := filepath.Join(victimDir, "4242-1.wait")
				if err := os.WriteFile(victim, []byte(`{"agent":"w","reason":"receive"}`), 0o600); err != nil {
					t.Fatal(err)
				}
				p, target := filepath.Join(db, "presence", "w", "4242-1.wait"), victim
				if where == "agent-dir" {
					p, target = filepath.Join(db, "presence", "w"), victimDir
					os.RemoveAll(p)
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				testproc.Plant(t, plant, p, target)

				for _, args := range commands {
					if code, out := run(args...); code != want[args[0]] {
						t.Errorf("inbox %s with the planted %s: exit %d, want %d as without it: %s", strings.Join(args, " "), plant, code, want[args[0]], out)
					}
				}
				if names, _ := os.ReadDir(victimDir); len(names) != 1 {
					t.Errorf("a wait was made through the planted link: %v", names)
				}
				code, out = run("fsck")
				check := map[string]string{"symlink": `"check":"symlink"`, "fifo": `"check":"planted_file"`, "socket": `"check":"planted_file"`}[plant]
				if code != 50 || !strings.Contains(out, check) || !strings.Contains(out, p) {
					t.Fatalf("fsck should report the planted %s at %s (%s): exit %d: %s", plant, p, check, code, out)
				}
				if code, out := run("fsck", "--repair"); code != 0 {
					t.Fatalf("fsck --repair: exit %d: %s", code, out)
				}
				if code, out := run("fsck"); code != 0 {
					t.Fatalf("fsck after the repair: exit %d: %s", code, out)
				}
				for _, args := range commands {
					if code, out := run(args...); code != want[args[0]] {
						t.Errorf("inbox %s after the repair: exit %d, want %d: %s", strings.Join(args, " "), code, want[args[0]], out)
					}
				}
			})
		}
	}
}
