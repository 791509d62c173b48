package teamfiles

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

func checks(fs []inbox.Finding) []string {
	var out []string
	for _, f := range fs {
		if !slices.Contains(out, f.Check) {
			out = append(out, f.Check)
		}
	}
	slices.Sort(out)
	return out
}

func TestCheckJSONL(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	s.CreateTeam(t.Context(), "lead", "alpha", []string{"a", "b"})
	br := startJSONL(t, s, dir, 0)
	var ids []string
	for _, body := range []string{"one", "two", "three"} {
		r, _ := s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Content: inbox.Content{Body: body}})
		ids = append(ids, r.Message.MessageID)
	}
	p := filepath.Join(dir, "alpha", "members", "b", "inbox")
	br.eventually("three lines", func() bool { return len(lines(t, p)) == 3 })
	br.stop()
	if fs, err := CheckJSONL(t.Context(), Config{Bus: s, Dir: dir}, false); err != nil || len(fs) != 0 {
		t.Fatalf("a file in step: %+v %v", fs, err)
	}
	// Damage: line two removed by a person (theirs to remove: not
	// missing), line three twice, a foreign line not taken in, and a
	// message sent while no bridge ran (missing: never written).
	late, _ := s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Content: inbox.Content{Body: "four"}})
	data, _ := os.ReadFile(p)
	ls := bytes.SplitAfter(data, []byte("\n"))
	damaged := append(append(append([]byte{}, ls[0]...), ls[2]...), ls[2]...)
	damaged = append(damaged, `{"type":"message","from":"a","to":"b","timestamp":"t","content":{"text":"foreign"}}`+"\n"...)
	os.WriteFile(p, damaged, 0o600)
	fs, err := CheckJSONL(t.Context(), Config{Bus: s, Dir: dir}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := checks(fs); !slices.Equal(got, []string{"team_file_duplicate_message", "team_file_missing_message", "team_file_not_taken_in"}) {
		t.Fatalf("findings %v (%+v)", got, fs)
	}
	fs, err = CheckJSONL(t.Context(), Config{Bus: s, Dir: dir}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if !f.Repaired {
			t.Errorf("not repaired: %+v", f)
		}
	}
	if fs, err := CheckJSONL(t.Context(), Config{Bus: s, Dir: dir}, false); err != nil || len(fs) != 0 {
		t.Fatalf("after repair: %+v %v", fs, err)
	}
	count := map[string]int{}
	for _, l := range lines(t, p) {
		if id, ok := l["messageId"].(string); ok {
			count[id]++
		}
	}
	for i, id := range append(ids, late.Message.MessageID) {
		want := 1
		if i == 1 {
			want = 0 // removed by a person: never written back
		}
		if count[id] != want {
			t.Errorf("message %s is %d times in the repaired file, want %d", id, count[id], want)
		}
	}
	if items, _ := s.Mailbox(t.Context(), "b", ""); !slices.ContainsFunc(items, func(it *inbox.MailItem) bool { return it.Message.Body == "foreign" }) {
		t.Error("the foreign line was not taken in by the repair")
	}
}

func TestCheckClaude(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	writeConfig(t, dir, "alpha", "team-lead", "researcher")
	br := startClaude(t, s, dir)
	s.AddMembers(t.Context(), "x", "alpha", []string{"coordinator"})
	s.Send(t.Context(), inbox.SendInput{From: "coordinator", To: "researcher", Content: inbox.Content{Body: "one"}})
	s.Send(t.Context(), inbox.SendInput{From: "coordinator", To: "researcher", Content: inbox.Content{Body: "two"}})
	p := filepath.Join(dir, "alpha", "inboxes", "researcher.json")
	br.eventually("two entries", func() bool { return len(entries(t, p)) == 2 })
	br.stop()
	if fs, err := CheckClaude(t.Context(), Config{Bus: s, Dir: dir}, false); err != nil || len(fs) != 0 {
		t.Fatalf("in step: %+v %v", fs, err)
	}
	es := entries(t, p)
	writeEntries(p, []*claudeEntry{es[1], es[1]})
	writeEntries(filepath.Join(dir, "alpha", "inboxes", "inbox.json"), []*claudeEntry{{From: "team-lead", Text: "to the bus", Timestamp: "2026-02-12T10:15:31.120Z"}})
	fs, err := CheckClaude(t.Context(), Config{Bus: s, Dir: dir}, false)
	if err != nil {
		t.Fatal(err)
	}
	// "one", which the bridge wrote and someone removed, is theirs to
	// remove (SPEC §11): not missing.
	if got := checks(fs); !slices.Equal(got, []string{"team_file_duplicate_message", "team_file_not_taken_in"}) {
		t.Fatalf("findings %v (%+v)", got, fs)
	}
	if _, err := CheckClaude(t.Context(), Config{Bus: s, Dir: dir}, true); err != nil {
		t.Fatal(err)
	}
	if fs, err := CheckClaude(t.Context(), Config{Bus: s, Dir: dir}, false); err != nil || len(fs) != 0 {
		t.Fatalf("after repair: %+v %v", fs, err)
	}
	if n := len(entries(t, p)); n != 1 {
		t.Errorf("researcher's inbox has %d entries after repair, want 1 (the duplicate gone, the removed entry not written back)", n)
	}
}
