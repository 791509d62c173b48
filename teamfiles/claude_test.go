package teamfiles

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

func writeConfig(t testing.TB, dir, team string, members ...string) {
	t.Helper()
	var ms []map[string]any
	for i, m := range members {
		ms = append(ms, map[string]any{"agentId": m + "@" + team, "name": m, "agentType": "general-purpose", "color": "blue", "joinedAt": 1770836587799 + i})
	}
	cfg := map[string]any{"name": team, "description": "test", "createdAt": 1770836587799, "leadAgentId": members[0] + "@" + team, "members": ms}
	os.MkdirAll(filepath.Join(dir, team, "inboxes"), 0o700)
	data, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, team, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func entries(t *testing.T, p string) []*claudeEntry {
	t.Helper()
	es, err := readEntries(p)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestClaudeBothWays(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	writeConfig(t, dir, "alpha", "team-lead", "researcher")
	br := startClaude(t, s, dir)
	// The team appears in the store; the bridge joined config.json.
	tm, err := s.Team(t.Context(), "alpha")
	if err != nil || !reflect.DeepEqual(tm.Members, []string{"team-lead", "researcher"}) {
		t.Fatalf("inbox team: %+v %v", tm, err)
	}
	members, _ := newClaude(Config{Dir: dir}).configMembers("alpha")
	if !reflect.DeepEqual(members, []string{"team-lead", "researcher", "inbox"}) {
		t.Fatalf("config.json members %v", members)
	}
	var cfg map[string]any
	readJSON(filepath.Join(dir, "alpha", "config.json"), &cfg)
	if cfg["leadAgentId"] != "team-lead@alpha" || cfg["description"] != "test" {
		t.Errorf("config.json lost its fields: %v", cfg)
	}
	// Out: a bus message to the team lands in each member's inbox, unread.
	r, err := s.Send(t.Context(), inbox.SendInput{From: "coordinator", To: "team-lead,researcher", Content: inbox.Content{Body: "hello team"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = r
	s.AddMembers(t.Context(), "x", "alpha", []string{"coordinator"})
	r2, _ := s.Send(t.Context(), inbox.SendInput{From: "coordinator", To: "@alpha", Content: inbox.Content{Body: "from the bus", Summary: "bus note"}})
	for _, m := range []string{"team-lead", "researcher"} {
		p := filepath.Join(dir, "alpha", "inboxes", m+".json")
		br.eventually(m+"'s entry", func() bool {
			for _, e := range entries(t, p) {
				if e.Text == "from the bus" && !e.Read && e.From == "coordinator" && e.Summary == "bus note" && e.Timestamp == r2.Message.CreatedAt {
					return true
				}
			}
			return false
		})
	}
	// In: teammates write to the bridge's inbox; taken in once, marked read.
	fixture, _ := os.ReadFile(filepath.Join("testdata", "claude-inbox.json"))
	own := filepath.Join(dir, "alpha", "inboxes", "inbox.json")
	unlock, err := lockFile(own)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(own, fixture, 0o600)
	unlock()
	br.eventually("entries read", func() bool {
		for _, e := range entries(t, own) {
			if !e.Read {
				return false
			}
		}
		return true
	})
	mail, _ := s.Mailbox(t.Context(), "inbox", "")
	lead, _ := s.Mailbox(t.Context(), "team-lead", "researcher")
	if len(mail) != 3 || len(lead) != 1 {
		t.Fatalf("taken in: %d to the bridge, %d to team-lead; want 3 and 1", len(mail), len(lead))
	}
	types := map[string]bool{}
	for _, it := range append(mail, lead...) {
		types[it.Message.Type] = true
	}
	if !types["idle_notification"] || !types["shutdown_request"] || !types["task_completion"] {
		t.Errorf("protocol messages not typed: %v", types)
	}
	if lead[0].Message.Type != "task_completion" {
		t.Errorf("the entry naming team-lead: %+v", lead[0].Message)
	}
	// Marked read, other fields kept, nothing taken in twice.
	var raw []map[string]any
	data, _ := os.ReadFile(own)
	json.Unmarshal(data, &raw)
	if raw[0]["color"] != "blue" || raw[0]["summary"] != "Review auth module" {
		t.Errorf("fields lost: %v", raw[0])
	}
	// A sweep begun after they were marked read takes nothing in again.
	br.swept()
	if mail, _ := s.Mailbox(t.Context(), "inbox", ""); len(mail) != 3 {
		t.Errorf("taken in again: %d", len(mail))
	}
	// The bridge never marks read in another member's file.
	for _, e := range entries(t, filepath.Join(dir, "alpha", "inboxes", "researcher.json")) {
		if e.Read {
			t.Errorf("an entry of researcher's inbox was marked read: %+v", e)
		}
	}
}

// TestClaudeRoundTrip: an entry taken into the store and written out to a
// member is the same entry (sender, text, summary, timestamp), protocol
// messages included.
func TestClaudeRoundTrip(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	writeConfig(t, dir, "alpha", "team-lead", "researcher", "team-lead-copy")
	startClaude(t, s, dir)
	fixture, _ := os.ReadFile(filepath.Join("testdata", "claude-inbox.json"))
	var want []*claudeEntry
	json.Unmarshal(fixture, &want)
	b := newClaude(Config{Bus: s, Dir: dir, Agent: "inbox"})
	for _, e := range want {
		if err := b.ingestEntry(t.Context(), "alpha", e); err != nil {
			t.Fatal(err)
		}
	}
	// Each stored message, written out again as an entry, is the original.
	items, _ := s.Mailbox(t.Context(), "inbox", "")
	lead, _ := s.Mailbox(t.Context(), "team-lead", "")
	got := map[string]*claudeEntry{}
	for _, it := range append(items, lead...) {
		e := entryOf(it.Message)
		got[e.From+e.Timestamp] = e
	}
	for _, w := range want {
		g := got[w.From+w.Timestamp]
		if g == nil {
			t.Fatalf("no message for %+v", w)
		}
		if g.Summary != w.Summary && w.Summary != "" {
			t.Errorf("summary %q, want %q", g.Summary, w.Summary)
		}
		var gv, wv any
		if json.Unmarshal([]byte(w.Text), &wv) == nil {
			json.Unmarshal([]byte(g.Text), &gv)
			if !reflect.DeepEqual(gv, wv) {
				t.Errorf("protocol text %s, want %s", g.Text, w.Text)
			}
		} else if g.Text != w.Text {
			t.Errorf("text %q, want %q", g.Text, w.Text)
		}
	}
}

func TestClaudeStaleLock(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "worker.json")
	ensureInbox(p)
	if err := os.Mkdir(p+".lock", 0o700); err != nil {
		t.Fatal(err)
	}
	// A fresh lock held by someone: refused after about a second.
	start := time.Now()
	if _, err := lockFile(p); err == nil {
		t.Fatal("took a live lock")
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 3*time.Second {
		t.Errorf("gave up after %v, want about a second", d)
	}
	// Older than 10 s: taken over.
	old := time.Now().Add(-11 * time.Second)
	os.Chtimes(p+".lock", old, old)
	unlock, err := lockFile(p)
	if err != nil {
		t.Fatalf("a stale lock was not taken over: %v", err)
	}
	unlock()
	if _, err := os.Stat(p + ".lock"); err == nil {
		t.Error("unlock left the lock")
	}
}

// TestClaudeJoinKeepsConfig: the bridge adds itself to config.json's
// members and changes nothing else of the file: key order, spacing,
// number spellings and members it does not know stay byte for byte.
func TestClaudeJoinKeepsConfig(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "alpha", "inboxes"), 0o700)
	head := `{
    "name": "alpha",
    "leadAgentId": "team-lead@alpha",
    "createdAt": 1770836587799,
    "members": [
        {"agentId": "team-lead@alpha", "name": "team-lead", "joinedAt": 1.7708365877990e12, "tmuxPaneId": "%1"},
        {
            "name": "researcher",
            "agentId": "researcher@alpha",
            "color": "blue"
        }`
	tail := `
    ],
    "zeta": {"b": 1, "a": "\u00e9"}
}
`
	p := filepath.Join(dir, "alpha", "config.json")
	if err := os.WriteFile(p, []byte(head+tail), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := newClaude(Config{Dir: dir}).join("alpha"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	got := string(data)
	if !strings.HasPrefix(got, head) || !strings.HasSuffix(got, tail) {
		t.Fatalf("config.json changed outside the members it adds:\n%s", got)
	}
	var added map[string]any
	mid := strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(got, head), tail), ",")
	if err := json.Unmarshal([]byte(mid), &added); err != nil || added["name"] != "inbox" || added["agentId"] != "inbox@alpha" {
		t.Fatalf("added %q (%v), want the bridge's member", mid, err)
	}
	if !strings.HasPrefix(mid, "\n        {\n            \"agentId\"") {
		t.Errorf("the added member is not indented as the others: %q", mid)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want the file's own 0644", fi.Mode().Perm())
	}
	// Joined already: nothing is written.
	if err := newClaude(Config{Dir: dir}).join("alpha"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(p); string(again) != got {
		t.Errorf("a second join changed the file:\n%s", again)
	}
	// A config.json without members gets them, after what it had.
	os.WriteFile(p, []byte(`{"name": "alpha"}`), 0o600)
	if err := newClaude(Config{Dir: dir}).join("alpha"); err != nil {
		t.Fatal(err)
	}
	if members, err := newClaude(Config{Dir: dir}).configMembers("alpha"); err != nil || !reflect.DeepEqual(members, []string{"inbox"}) {
		t.Errorf("members %v %v, want the bridge", members, err)
	}
	if data, _ := os.ReadFile(p); !strings.HasPrefix(string(data), `{"name": "alpha",`) {
		t.Errorf("config.json without members became %s", data)
	}
}
