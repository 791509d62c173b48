package teamfiles

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

func lines(t *testing.T, p string) []map[string]any {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: a line is not JSON: %q", p, sc.Text())
		}
		out = append(out, v)
	}
	return out
}

func appendRaw(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestJSONLBothWays(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	if _, err := s.CreateTeam(t.Context(), "lead", "alpha", []string{"coordinator", "backend-dev", "tester"}); err != nil {
		t.Fatal(err)
	}
	br := startJSONL(t, s, dir, 0)
	inboxOf := func(m string) string { return filepath.Join(dir, "alpha", "members", m, "inbox") }
	fi, err := os.Stat(filepath.Dir(inboxOf("tester")))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("member dir: %v %v", fi, err)
	}
	// Out: a broadcast lands once in each member's file, not the sender's.
	r, err := s.Send(t.Context(), inbox.SendInput{From: "coordinator", To: "@alpha", Content: inbox.Content{Type: "team_broadcast", PayloadJSON: `{"text":"standup"}`}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"backend-dev", "tester"} {
		br.eventually(m+"'s line", func() bool { return len(lines(t, inboxOf(m))) == 1 })
		l := lines(t, inboxOf(m))[0]
		if l["type"] != "team_broadcast" || l["from"] != "coordinator" || l["messageId"] != r.Message.MessageID || l["content"].(map[string]any)["text"] != "standup" {
			t.Errorf("%s's line: %v", m, l)
		}
	}
	if n := len(lines(t, inboxOf("coordinator"))); n != 0 {
		t.Errorf("the sender's own file has %d lines", n)
	}
	if fi, _ := os.Stat(inboxOf("tester")); fi.Mode().Perm() != 0o600 {
		t.Errorf("inbox mode %v", fi.Mode())
	}
	// Mail from outside the team does not go to team files.
	s.Send(t.Context(), inbox.SendInput{From: "stranger", To: "tester", Content: inbox.Content{Body: "hi"}})
	// In: seed 002's echo >> inbox, a malformed line, and a line without its newline yet.
	appendRaw(t, inboxOf("backend-dev"), `{"type":"message","from":"coordinator","to":"backend-dev","timestamp":"2026-02-15T11:15:00Z","content":{"text":"Hello"}}`+"\n")
	appendRaw(t, inboxOf("backend-dev"), "not json at all\n")
	appendRaw(t, inboxOf("backend-dev"), `{"type":"task_completion","from":"backend-dev2","to":"coordinator","timestamp":"2026-02-15T16:00:00Z",`)
	br.eventually("the foreign line in the store", func() bool {
		items, _ := s.Mailbox(t.Context(), "backend-dev", "coordinator")
		for _, it := range items {
			if it.Message.Body == "Hello" {
				return true
			}
		}
		return false
	})
	br.eventually("errors.log", func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "alpha", "members", "backend-dev", "errors.log"))
		return strings.Contains(string(data), "line 3: ") && strings.Contains(string(data), "not json at all")
	})
	// The rest of the partial line arrives: it is taken in.
	appendRaw(t, inboxOf("backend-dev"), `"content":{"notes":"done"}}`+"\n")
	br.eventually("the completed line", func() bool {
		items, _ := s.Mailbox(t.Context(), "backend-dev", "backend-dev2")
		return len(items) == 1 && items[0].Message.Type == "task_completion"
	})
	// The lines taken in are not written back into the file they came
	// from: once the bridge has handled every event, theirs included.
	br.handled(t.Context(), s)
	raw, _ := os.ReadFile(inboxOf("backend-dev"))
	if c := strings.Count(string(raw), "\n"); c != 4 {
		t.Errorf("backend-dev's inbox has %d lines, want 4 (broadcast, hello, bad, completion):\n%s", c, raw)
	}
}

// TestJSONLRestartExactlyOnce: lines taken in before a restart are not
// taken in again, and messages written out are not written twice, even
// when the bridge's state is lost.
func TestJSONLRestartExactlyOnce(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	s.CreateTeam(t.Context(), "lead", "alpha", []string{"a", "b"})
	br := startJSONL(t, s, dir, 0)
	inboxB := filepath.Join(dir, "alpha", "members", "b", "inbox")
	for i := range 5 {
		s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Content: inbox.Content{Body: "out " + string(rune('0'+i))}})
		appendRaw(t, inboxB, `{"type":"message","from":"a","to":"b","timestamp":"t`+string(rune('0'+i))+`","content":{"text":"in `+string(rune('0'+i))+`"}}`+"\n")
	}
	br.eventually("all in", func() bool { items, _ := s.Mailbox(t.Context(), "b", ""); return len(items) == 10 })
	br.eventually("all out", func() bool { return len(lines(t, inboxB)) == 10 })
	br.stop()
	// Lose the state: both directions must still be exactly once, once the
	// new bridge has caught up with the log and looked at every file again.
	os.RemoveAll(filepath.Join(dir, stateDir))
	br = startJSONL(t, s, dir, 0)
	br.handled(t.Context(), s)
	br.swept()
	if items, _ := s.Mailbox(t.Context(), "b", ""); len(items) != 10 {
		t.Errorf("after a restart without state: %d messages in b's mailbox, want 10", len(items))
	}
	if n := len(lines(t, inboxB)); n != 10 {
		t.Errorf("after a restart without state: %d lines, want 10", n)
	}
}

// TestJSONLRotation: past MaxSize the bridge rotates the inbox, and a
// rotation by someone else loses no line not yet taken in.
func TestJSONLRotation(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	s.CreateTeam(t.Context(), "lead", "alpha", []string{"a", "b"})
	br := startJSONL(t, s, dir, 2000)
	mdir := filepath.Join(dir, "alpha", "members", "b")
	for i := range 20 {
		if _, err := s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Content: inbox.Content{Body: strings.Repeat("x", 200) + string(rune('a'+i))}}); err != nil {
			t.Fatal(err)
		}
	}
	br.eventually("rotated files", func() bool {
		m, _ := filepath.Glob(filepath.Join(mdir, "inbox.2*"))
		return len(m) >= 1
	})
	count := func() int {
		n := 0
		ms, _ := filepath.Glob(filepath.Join(mdir, "inbox*"))
		for _, p := range ms {
			if strings.HasSuffix(p, ".lock") {
				continue
			}
			n += len(lines(t, p))
		}
		return n
	}
	br.eventually("20 lines across the files", func() bool { return count() == 20 })
	// Someone else rotates while a foreign line is still unread.
	appendRaw(t, filepath.Join(mdir, "inbox"), `{"type":"message","from":"a","to":"b","timestamp":"x","content":{"text":"just before"}}`+"\n")
	os.Rename(filepath.Join(mdir, "inbox"), filepath.Join(mdir, "inbox.19990101-000000"))
	appendRaw(t, filepath.Join(mdir, "inbox"), `{"type":"message","from":"a","to":"b","timestamp":"y","content":{"text":"just after"}}`+"\n")
	br.eventually("both lines in the store", func() bool {
		items, _ := s.Mailbox(t.Context(), "b", "")
		got := map[string]bool{}
		for _, it := range items {
			got[it.Message.Body] = true
		}
		return got["just before"] && got["just after"]
	})
}
