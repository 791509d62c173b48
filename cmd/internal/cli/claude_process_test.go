package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/internal/testproc"
	"github.com/inbox-dev/inbox/spool"
)

// npmInstall copies testdata/NAME into a temp dir and installs its pinned
// packages there with npm ci.
func npmInstall(t *testing.T, name string, files ...string) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is needed to install the test's Node.js packages: %v", err)
	}
	dir := t.TempDir()
	for _, f := range append([]string{"package.json", "package-lock.json"}, files...) {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", name, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return dir
}

type claudeEntryT struct {
	From      string `json:"from"`
	Text      string `json:"text"`
	Timestamp string `json:"timestamp"`
	Read      bool   `json:"read"`
}

func readInboxFile(t *testing.T, p string) []claudeEntryT {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var es []claudeEntryT
	if err := json.Unmarshal(data, &es); err != nil {
		t.Fatalf("%s is not a JSON array: %v", p, err)
	}
	return es
}

func writeClaudeTeam(t *testing.T, dir, team string, members ...string) {
	t.Helper()
	var ms []map[string]any
	for _, m := range members {
		ms = append(ms, map[string]any{"agentId": m + "@" + team, "name": m, "agentType": "general-purpose"})
	}
	data, _ := json.Marshal(map[string]any{"name": team, "leadAgentId": members[0] + "@" + team, "members": ms})
	if err := os.MkdirAll(filepath.Join(dir, team, "inboxes"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, team, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClaudeTeamsProcesses: 4 writers using proper-lockfile (the library
// Claude Code locks its inboxes with, from npm) write 200 entries (800
// in the long run) to the bridge's inbox while the CLI sends 50 messages
// (200) to a teammate and the bridging daemon is SIGKILLed and restarted
// at random: every entry is in the store once and marked read, every send
// is in the teammate's inbox once, and no entry is lost from either file.
func TestClaudeTeamsProcesses(t *testing.T) {
	writers, each, sends := 4, 50, 50
	if testproc.Long {
		each, sends = 200, 200
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for Claude Code's locking library: %v", err)
	}
	js := npmInstall(t, "claude-writer", "writer.mjs")
	s, db := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	writeClaudeTeam(t, dir, "beta", "team-lead", "researcher")
	bin := testproc.Installed(t, "inbox")
	d := &killableDaemon{t: t, bin: bin, args: []string{"daemon", "--db", db, "--claude-teams=" + dir, "--agent", "bridge"}}
	d.start()
	defer d.stop()
	own := filepath.Join(dir, "beta", "inboxes", "bridge.json")
	testproc.Eventually(t, 10*time.Second, "the bridge's inbox", func() bool { _, err := os.Stat(own); return err == nil })
	testproc.Eventually(t, 10*time.Second, "the team in the store", func() bool { _, err := s.Team(t.Context(), "beta"); return err == nil })
	var cmds []*exec.Cmd
	for w := range writers {
		c := exec.Command(node, "writer.mjs", own, []string{"team-lead", "researcher"}[w%2], fmt.Sprintf("w%d", w), fmt.Sprint(each))
		c.Dir = js
		cmds = append(cmds, c)
	}
	cmds = append(cmds, exec.Command("bash", "-c", fmt.Sprintf(`for i in $(seq %d); do %s send --db %s --from team-lead --to researcher --body "s$i" || exit 1; done`,
		sends, shq(bin), shq(db))))
	stopKilling := d.killAtRandom(3, 100*time.Millisecond, 300*time.Millisecond)
	outs := runConcurrently(t, cmds)
	killed := stopKilling()
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("writer %d: %v\n%s%s", i, o.err, o.stdout.String(), o.stderr.String())
		}
	}
	theirs := filepath.Join(dir, "beta", "inboxes", "researcher.json")
	var state string
	across := testproc.Poll(60*time.Second, func() bool {
		items, _ := s.Mailbox(t.Context(), "bridge", "")
		es := readInboxFile(t, own)
		unread := 0
		for _, e := range es {
			if !e.Read {
				unread++
			}
		}
		out := len(readInboxFile(t, theirs))
		state = fmt.Sprintf("%d of %d entries in the store, %d of %d unread in the bridge's inbox, %d of %d sends in researcher's inbox",
			len(items), writers*each, unread, len(es), out, sends)
		return len(items) >= writers*each && unread == 0 && out >= sends
	})
	if !across {
		d.stop()
		t.Fatalf("not everything across within 60 s after %d kills: %s\ndaemon's log:\n%s", killed, state, tail(d.logs.String(), 3000))
	}
	d.stop()
	items, _ := s.Mailbox(t.Context(), "bridge", "")
	wantEachOnce(t, items, "entry", writers, each)
	if es := readInboxFile(t, own); len(es) != writers*each {
		t.Fatalf("the bridge's inbox holds %d entries, want %d: an entry was lost", len(es), writers*each)
	}
	texts := map[string]int{}
	for _, e := range readInboxFile(t, theirs) {
		texts[e.Text]++
		if e.Read {
			t.Errorf("the bridge marked an entry of researcher's inbox read: %+v", e)
		}
	}
	for i := 1; i <= sends; i++ {
		if n := texts[fmt.Sprintf("s%d", i)]; n != 1 {
			t.Fatalf("send s%d is %d times in researcher's inbox", i, n)
		}
	}
	if _, err := s.Fsck(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Fsck(t.Context(), false); err != nil || len(rep.Findings) != 0 {
		t.Fatalf("fsck after repair: %+v %v", rep, err)
	}
	t.Logf("%d daemon kills; %d entries taken in and %d sends written out, each once", killed, writers*each, sends)
}

// TestClaudeStaleLockProcess: a lock left by a killed writer holds the
// bridge off for 10 s, then is taken over.
func TestClaudeStaleLockProcess(t *testing.T) {
	t.Parallel() // it mostly waits for the lock to go stale
	s, db := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	writeClaudeTeam(t, dir, "beta", "team-lead", "researcher")
	theirs := filepath.Join(dir, "beta", "inboxes", "researcher.json")
	if err := os.WriteFile(theirs, []byte("[]"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The writer died holding the lock.
	if err := os.Mkdir(theirs+".lock", 0o700); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	d := &killableDaemon{t: t, bin: testproc.Installed(t, "inbox"), args: []string{"daemon", "--db", db, "--claude-teams=" + dir}}
	d.start()
	defer d.stop()
	testproc.Eventually(t, 10*time.Second, "the team in the store", func() bool { _, err := s.Team(t.Context(), "beta"); return err == nil })
	if out, err := exec.Command(testproc.Installed(t, "inbox"), "send", "--db", db, "--from", "team-lead", "--to", "researcher", "--body", "after the lock").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	has := func() bool {
		for _, e := range readInboxFile(t, theirs) {
			if e.Text == "after the lock" {
				return true
			}
		}
		return false
	}
	for time.Since(locked) < 9*time.Second {
		if has() {
			t.Fatalf("the bridge wrote through a live lock after %v", time.Since(locked))
		}
		time.Sleep(100 * time.Millisecond)
	}
	testproc.Eventually(t, 8*time.Second, "the entry once the lock went stale", has)
	if d := time.Since(locked); d < 10*time.Second {
		t.Errorf("taken over after %v, before 10 s", d)
	}
}
