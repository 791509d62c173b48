package teamfiles

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// fsckPlanted checks that check (CheckJSONL or CheckClaude) reports each
// of the planted paths as team_file_unsafe, that with repair it sets each
// aside, and that it reports none afterwards.
func fsckPlanted(t *testing.T, check func(context.Context, Config, bool) ([]inbox.Finding, error), cfg Config, planted ...string) {
	t.Helper()
	unsafe := func(repair bool) []inbox.Finding {
		t.Helper()
		fs, err := check(t.Context(), cfg, repair)
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(fs, func(f inbox.Finding) bool { return f.Check != "team_file_unsafe" })
	}
	var flagged []string
	for _, f := range unsafe(false) {
		flagged = append(flagged, f.Path)
	}
	for _, want := range planted {
		if !slices.Contains(flagged, want) {
			t.Errorf("fsck does not report %s (it reports %q)", want, flagged)
		}
	}
	for _, f := range unsafe(true) {
		if !f.Repaired {
			t.Errorf("not set aside: %+v", f)
		}
	}
	for _, f := range unsafe(false) {
		t.Errorf("still reported after repair: %+v", f)
	}
}

// mustMkfifo makes a FIFO at p.
func mustMkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
}

// unchanged checks that a file outside the team directory still holds
// want, or still does not exist (want "").
func unchanged(t *testing.T, p, want string) {
	t.Helper()
	data, err := os.ReadFile(p)
	switch {
	case want == "" && err == nil:
		t.Errorf("%s was created through a planted symlink: %q", p, data)
	case want != "" && string(data) != want:
		t.Errorf("%s was changed through a planted symlink: %q, want %q (%v)", p, data, want, err)
	}
}

// emptyDir checks that a directory outside the team directory is empty.
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		t.Errorf("%s was written through a planted symlink: %s", dir, e.Name())
	}
}

// TestJSONLPlantedFiles plants, in seed 002's team directory, a symlink
// in place of a member's inbox, of a member's directory, of a team's
// directory, of an inbox.lock and of an errors.log, and a FIFO in place
// of an inbox. The bridge never writes or reads through the symlinks,
// never blocks on the FIFO, logs an error naming each, and serves the
// members whose files are sound; fsck reports each and --repair sets the
// planted file aside, leaving its target alone.
func TestJSONLPlantedFiles(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	outside := t.TempDir()
	members := []string{"lead", "symlinked", "fifo", "linkdir", "lockless", "sound"}
	if _, err := s.CreateTeam(t.Context(), "lead", "alpha", members); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTeam(t.Context(), "lead", "beta", []string{"lead", "sound"}); err != nil {
		t.Fatal(err)
	}
	memberDir := func(team, m string) string { return filepath.Join(dir, team, "members", m) }
	for _, m := range members {
		if m != "linkdir" {
			if err := os.MkdirAll(memberDir("alpha", m), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A line in the symlink's target that must not be taken in.
	victim := filepath.Join(outside, "victim")
	const victimText = `{"type":"message","from":"intruder","to":"symlinked","timestamp":"2026-02-15T11:15:00Z","content":{"text":"read through"}}` + "\n"
	os.WriteFile(victim, []byte(victimText), 0o600)
	os.Symlink(victim, filepath.Join(memberDir("alpha", "symlinked"), "inbox"))
	mustMkfifo(t, filepath.Join(memberDir("alpha", "fifo"), "inbox"))
	victimDir := filepath.Join(outside, "dir")
	os.Mkdir(victimDir, 0o700)
	os.Symlink(victimDir, memberDir("alpha", "linkdir"))
	victimTeam := filepath.Join(outside, "team")
	os.Mkdir(victimTeam, 0o700)
	os.Symlink(victimTeam, filepath.Join(dir, "beta"))
	victimLock := filepath.Join(outside, "lock")
	os.Symlink(victimLock, filepath.Join(memberDir("alpha", "lockless"), "inbox.lock"))
	victimLog := filepath.Join(outside, "errors")
	os.WriteFile(victimLog, []byte("kept\n"), 0o600)
	os.Symlink(victimLog, filepath.Join(memberDir("alpha", "lead"), "errors.log"))
	// A bad line, whose report errors.log must not take, then a good one:
	// once the good one is in the store, the bad one was handled.
	os.WriteFile(filepath.Join(memberDir("alpha", "lead"), "inbox"), []byte("not json\n"+
		`{"type":"message","from":"sound","to":"lead","timestamp":"2026-02-15T11:15:00Z","content":{"text":"after the bad line"}}`+"\n"), 0o600)

	br := startBridge(t, RunJSONL, Config{Bus: s, Dir: dir, Sweep: 100 * time.Millisecond})
	log := br.log
	r, err := s.Send(t.Context(), inbox.SendInput{From: "lead", To: "@alpha", Content: inbox.Content{Body: "to everyone"}})
	if err != nil {
		t.Fatal(err)
	}
	// The sound member's line is the marker: the others had their turn.
	sound := filepath.Join(memberDir("alpha", "sound"), "inbox")
	br.eventually("the sound member's line", func() bool {
		data, _ := os.ReadFile(sound)
		return bytes.Contains(data, []byte(r.Message.MessageID))
	})
	br.eventually("the good line after the bad one", func() bool {
		items, _ := s.Mailbox(t.Context(), "lead", "sound")
		return len(items) == 1
	})
	br.stop()
	unchanged(t, victim, victimText)
	unchanged(t, victimLock, "")
	unchanged(t, victimLog, "kept\n")
	emptyDir(t, victimDir)
	emptyDir(t, victimTeam)
	if fi, err := os.Lstat(filepath.Join(memberDir("alpha", "fifo"), "inbox")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO: %v, %v", fi, err)
	}
	if items, _ := s.Mailbox(t.Context(), "symlinked", "intruder"); len(items) > 0 {
		t.Errorf("a line was read through the symlink: %+v", items[0].Message)
	}
	for _, want := range []string{"symlinked/inbox", "fifo/inbox", "members/linkdir", "beta", "lockless/inbox.lock", "lead/errors.log"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not name %s:\n%s", want, log)
		}
	}
	if !strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("the refusals are not logged as errors:\n%s", log)
	}

	// fsck reports the planted files, and --repair sets them aside.
	fsckPlanted(t, CheckJSONL, Config{Bus: s, Dir: dir},
		filepath.Join(memberDir("alpha", "symlinked"), "inbox"),
		filepath.Join(memberDir("alpha", "fifo"), "inbox"),
		memberDir("alpha", "linkdir"),
		filepath.Join(dir, "beta"),
		filepath.Join(memberDir("alpha", "lockless"), "inbox.lock"),
		filepath.Join(memberDir("alpha", "lead"), "errors.log"))
	unchanged(t, victim, victimText)
	unchanged(t, victimLog, "kept\n")
	emptyDir(t, victimDir)
	emptyDir(t, victimTeam)
	if _, err := os.Lstat(filepath.Join(memberDir("alpha", "symlinked"), "inbox.bad")); err != nil {
		t.Errorf("the planted inbox was not set aside as inbox.bad: %v", err)
	}
}

// TestClaudePlantedFiles plants, in Claude Code's team directory, a
// symlink in place of a team's inboxes directory, of a member's inbox and
// of the bridge's own inbox, and FIFOs in place of a member's inbox and of
// a team's config.json. The bridge never writes or reads through them,
// never blocks, logs an error naming each, and serves the sound members;
// fsck reports each and --repair sets it aside.
func TestClaudePlantedFiles(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	outside := t.TempDir()
	// alpha: inboxes is a symlink to a directory outside.
	writeConfig(t, dir, "alpha", "lead", "researcher")
	victimDir := filepath.Join(outside, "inboxes")
	os.Mkdir(victimDir, 0o700)
	os.RemoveAll(filepath.Join(dir, "alpha", "inboxes"))
	os.Symlink(victimDir, filepath.Join(dir, "alpha", "inboxes"))
	// beta: a symlinked inbox, a FIFO inbox, a sound one.
	writeConfig(t, dir, "beta", "lead", "researcher", "writer", "sound")
	victim := filepath.Join(outside, "researcher.json")
	os.WriteFile(victim, []byte("[]"), 0o600)
	os.Symlink(victim, filepath.Join(dir, "beta", "inboxes", "researcher.json"))
	mustMkfifo(t, filepath.Join(dir, "beta", "inboxes", "writer.json"))
	// gamma: config.json is a FIFO. delta: the bridge's own inbox is a
	// symlink to entries that must not be taken in.
	os.MkdirAll(filepath.Join(dir, "gamma", "inboxes"), 0o700)
	mustMkfifo(t, filepath.Join(dir, "gamma", "config.json"))
	writeConfig(t, dir, "delta", "lead", "inbox")
	victimOwn := filepath.Join(outside, "own.json")
	const ownText = `[{"from":"lead","text":"read through","timestamp":"2026-02-12T10:15:31.120Z","read":false}]`
	os.WriteFile(victimOwn, []byte(ownText), 0o600)
	os.Symlink(victimOwn, filepath.Join(dir, "delta", "inboxes", "inbox.json"))

	br := startBridge(t, RunClaude, Config{Bus: s, Dir: dir, Sweep: 100 * time.Millisecond})
	log := br.log
	br.eventually("team beta", func() bool { _, err := s.Team(t.Context(), "beta"); return err == nil })
	br.eventually("team alpha", func() bool { _, err := s.Team(t.Context(), "alpha"); return err == nil })
	if _, err := s.Send(t.Context(), inbox.SendInput{From: "lead", To: "@alpha", Content: inbox.Content{Body: "to alpha"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(t.Context(), inbox.SendInput{From: "lead", To: "@beta", Content: inbox.Content{Body: "to beta"}}); err != nil {
		t.Fatal(err)
	}
	sound := filepath.Join(dir, "beta", "inboxes", "sound.json")
	br.eventually("the sound member's entry", func() bool {
		es, _ := readEntries(sound)
		return slices.ContainsFunc(es, func(e *claudeEntry) bool { return e.Text == "to beta" })
	})
	br.stop()
	emptyDir(t, victimDir)
	unchanged(t, victim, "[]")
	unchanged(t, victimOwn, ownText)
	if fi, err := os.Lstat(filepath.Join(dir, "beta", "inboxes", "writer.json")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO: %v, %v", fi, err)
	}
	if items, _ := s.Mailbox(t.Context(), "inbox", "lead"); len(items) > 0 {
		t.Errorf("an entry was read through the symlink: %+v", items[0].Message)
	}
	for _, want := range []string{"alpha/inboxes", "beta/inboxes/researcher.json", "beta/inboxes/writer.json", "gamma/config.json", "delta/inboxes/inbox.json"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not name %s:\n%s", want, log)
		}
	}

	fsckPlanted(t, CheckClaude, Config{Bus: s, Dir: dir},
		filepath.Join(dir, "alpha", "inboxes"),
		filepath.Join(dir, "beta", "inboxes", "researcher.json"),
		filepath.Join(dir, "beta", "inboxes", "writer.json"),
		filepath.Join(dir, "gamma", "config.json"),
		filepath.Join(dir, "delta", "inboxes", "inbox.json"))
	emptyDir(t, victimDir)
	unchanged(t, victim, "[]")
	unchanged(t, victimOwn, ownText)
}
