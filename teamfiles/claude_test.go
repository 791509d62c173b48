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

// texts lists the texts of the entries of an inbox file.
func texts(t *testing.T, p string) []string {
	t.Helper()
	var out []string
	for _, e := range entries(t, p) {
		out = append(out, e.Text)
	}
	return out
}

// TestClaudeEveryDelivery: every message delivered to a member of a Claude
// Code team is added to its inbox, whoever sent it (also a sender in no
// team) and however it was addressed (by name, in a list, to a team of
// the bus's). A member of two Claude teams gets a message to one of them
// in that team's file only, and any other in both.
func TestClaudeEveryDelivery(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	writeConfig(t, dir, "alpha", "team-lead", "researcher")
	writeConfig(t, dir, "beta", "team-lead", "tester")
	br := startClaude(t, s, dir)
	ctx := t.Context()
	if _, err := s.CreateTeam(ctx, "ops-lead", "ops", []string{"ops-lead", "researcher"}); err != nil {
		t.Fatal(err)
	}
	for _, in := range []inbox.SendInput{
		{From: "outsider", To: "researcher", Content: inbox.Content{Body: "direct"}},
		{From: "outsider", To: "researcher,tester", Content: inbox.Content{Body: "list"}},
		{From: "ops-lead", To: "@ops", Content: inbox.Content{Body: "ops team"}},
		{From: "outsider", To: "team-lead", Content: inbox.Content{Body: "both files"}},
		{From: "outsider", To: "@beta", Content: inbox.Content{Body: "beta only"}},
	} {
		if _, err := s.Send(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	br.handled(ctx, s)
	for _, c := range []struct {
		file string
		want []string
	}{
		{"alpha/inboxes/researcher.json", []string{"direct", "list", "ops team"}},
		{"beta/inboxes/tester.json", []string{"list", "beta only"}},
		{"alpha/inboxes/team-lead.json", []string{"both files"}},
		{"beta/inboxes/team-lead.json", []string{"both files", "beta only"}},
	} {
		if got := texts(t, filepath.Join(dir, c.file)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.file, got, c.want)
		}
	}
	br.stop()
	if fs, err := CheckClaude(ctx, Config{Bus: s, Dir: dir}, false); err != nil || len(fs) != 0 {
		t.Errorf("fsck: %+v %v, want clean", fs, err)
	}
}

// TestClaudeIdlePresence: an idle_notification a teammate writes to the
// bridge's inbox sets its idle_since, as one sent on the bus does.
func TestClaudeIdlePresence(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	writeConfig(t, dir, "alpha", "team-lead", "researcher")
	br := startClaude(t, s, dir)
	own := filepath.Join(dir, "alpha", "inboxes", "inbox.json")
	err := updateEntries(own, func(es []*claudeEntry) ([]*claudeEntry, bool) {
		return append(es, &claudeEntry{From: "researcher", Timestamp: "2026-02-12T10:20:02.441Z",
			Text: `{"type":"idle_notification","from":"researcher","timestamp":"2026-02-12T10:20:02.441Z","idleReason":"available"}`}), true
	})
	if err != nil {
		t.Fatal(err)
	}
	br.eventually("the entry read", func() bool { es := entries(t, own); return len(es) == 1 && es[0].Read })
	as, err := s.Agents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.Agent == "researcher" {
			if a.IdleSince == "" {
				t.Errorf("researcher: %+v, want idle_since set", a)
			}
			return
		}
	}
	t.Errorf("researcher is not among the agents: %+v", as)
}

// rewriteEntries replaces an inbox file as a person's recipe does (jq to a temp
// file, then mv), without Claude Code's lock, keeping the entries keep
// says to.
func rewriteEntries(t *testing.T, p string, keep func(e *claudeEntry) bool) {
	t.Helper()
	var kept []*claudeEntry
	for _, e := range entries(t, p) {
		if keep(e) {
			kept = append(kept, e)
		}
	}
	data, _ := json.Marshal(kept)
	if err := os.WriteFile(p+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
}

// TestClaudeEditsAreTheirs: an entry the bridge wrote and a person removed
// is never written back, by the bridge after a restart or by fsck
// --repair; entries of the bridge's own inbox rewritten unread are never
// taken in twice.
func TestClaudeEditsAreTheirs(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	writeConfig(t, dir, "alpha", "team-lead", "researcher")
	br := startClaude(t, s, dir)
	ctx := t.Context()
	for _, b := range []string{"one", "two", "three"} {
		if _, err := s.Send(ctx, inbox.SendInput{From: "outsider", To: "researcher", Content: inbox.Content{Body: b}}); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "alpha", "inboxes", "researcher.json")
	br.handled(ctx, s)
	// In: an entry taken in, then rewritten unread by a recipe.
	own := filepath.Join(dir, "alpha", "inboxes", "inbox.json")
	updateEntries(own, func(es []*claudeEntry) ([]*claudeEntry, bool) {
		return append(es, &claudeEntry{From: "team-lead", Text: "to the bus", Timestamp: "2026-02-12T10:15:31.120Z"}), true
	})
	br.eventually("the entry read", func() bool { es := entries(t, own); return len(es) == 1 && es[0].Read })
	rewriteEntries(t, own, func(e *claudeEntry) bool { e.Read = false; return true })
	br.eventually("the entry read again", func() bool { es := entries(t, own); return len(es) == 1 && es[0].Read })
	br.stop()
	if mail, _ := s.Mailbox(ctx, "inbox", ""); len(mail) != 1 {
		t.Errorf("%d messages in the bridge's mailbox, want the entry once", len(mail))
	}

	// Out: "one" archived away by a person.
	rewriteEntries(t, p, func(e *claudeEntry) bool { return e.Text != "one" })
	if fs, err := CheckClaude(ctx, Config{Bus: s, Dir: dir}, false); err != nil || len(fs) != 0 {
		t.Errorf("fsck after a removal: %+v %v, want clean", fs, err)
	}
	if _, err := CheckClaude(ctx, Config{Bus: s, Dir: dir}, true); err != nil {
		t.Fatal(err)
	}
	br = startClaude(t, s, dir)
	s.Send(ctx, inbox.SendInput{From: "outsider", To: "researcher", Content: inbox.Content{Body: "four"}})
	br.handled(ctx, s)
	if got, want := texts(t, p), []string{"two", "three", "four"}; !reflect.DeepEqual(got, want) {
		t.Errorf("researcher's inbox %q, want %q", got, want)
	}
}

// TestClaudeCheckFindings: fsck finds what the bridge never wrote, what
// is in a file twice and what teammates wrote that is not taken in, and
// --repair makes the files agree.
func TestClaudeCheckFindings(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	writeConfig(t, dir, "alpha", "team-lead", "researcher")
	ctx := t.Context()
	// No bridge ran: both messages are missing.
	s.Send(ctx, inbox.SendInput{From: "coordinator", To: "researcher", Content: inbox.Content{Body: "one"}})
	s.Send(ctx, inbox.SendInput{From: "coordinator", To: "researcher", Content: inbox.Content{Body: "two"}})
	own := filepath.Join(dir, "alpha", "inboxes", "inbox.json")
	writeEntries(own, []*claudeEntry{{From: "team-lead", Text: "to the bus", Timestamp: "2026-02-12T10:15:31.120Z"}})
	fs, err := CheckClaude(ctx, Config{Bus: s, Dir: dir}, false)
	if got := checks(fs); err != nil || !reflect.DeepEqual(got, []string{"team_file_missing_message", "team_file_not_taken_in"}) || len(fs) != 3 {
		t.Fatalf("findings %v %v (%+v)", got, err, fs)
	}
	if _, err := CheckClaude(ctx, Config{Bus: s, Dir: dir}, true); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "alpha", "inboxes", "researcher.json")
	if got := texts(t, p); !reflect.DeepEqual(got, []string{"one", "two"}) {
		t.Fatalf("researcher's inbox after repair: %q", got)
	}
	es := entries(t, p)
	writeEntries(p, []*claudeEntry{es[0], es[1], es[1]})
	fs, err = CheckClaude(ctx, Config{Bus: s, Dir: dir}, true)
	if got := checks(fs); err != nil || !reflect.DeepEqual(got, []string{"team_file_duplicate_message"}) {
		t.Fatalf("findings %v %v (%+v)", got, err, fs)
	}
	if fs, err := CheckClaude(ctx, Config{Bus: s, Dir: dir}, false); err != nil || len(fs) != 0 {
		t.Fatalf("after repair: %+v %v", fs, err)
	}
	if got := texts(t, p); !reflect.DeepEqual(got, []string{"one", "two"}) {
		t.Errorf("researcher's inbox after repair: %q", got)
	}
}

// TestClaudeUpdateSeesRewrite: a file rewritten without the lock (a
// person's jq and mv) between the bridge's read and its rename is read
// again, so the bridge never writes back what the rewrite removed.
func TestClaudeUpdateSeesRewrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "researcher.json")
	writeEntries(p, []*claudeEntry{{From: "a", Text: "archived", Timestamp: "t1"}})
	once := false
	beforeReplace = func(string) {
		if !once {
			once = true
			rewriteEntries(t, p, func(e *claudeEntry) bool { return false })
		}
	}
	defer func() { beforeReplace = nil }()
	err := updateEntries(p, func(es []*claudeEntry) ([]*claudeEntry, bool) {
		return append(es, &claudeEntry{From: "b", Text: "new", Timestamp: "t2"}), true
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(t, p); !reflect.DeepEqual(got, []string{"new"}) {
		t.Errorf("got %q, want the new entry alone", got)
	}
}
