package teamfiles

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/storetest"
	"github.com/inbox-dev/inbox/spool"
)

// TestJSONLRequestResponse: a response line (seed 002's requestId) in the
// requester's file is a reply in the request's thread, so wait-reply
// --request-id wakes on it; it is not written back into the file it came
// from, and reading the file again after losing the state takes it in
// once.
func TestJSONLRequestResponse(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	s.CreateTeam(t.Context(), "lead", "alpha", []string{"coordinator", "backend-dev"})
	br := startJSONL(t, s, dir, 0)
	req, err := s.Send(t.Context(), inbox.SendInput{From: "coordinator", To: "backend-dev", Content: inbox.Content{
		Type: "task_status_request", RequestID: "req-98765", PayloadJSON: `{"taskId":"a1"}`}})
	if err != nil {
		t.Fatal(err)
	}
	tid := req.Thread.ThreadID
	coord := filepath.Join(dir, "alpha", "members", "coordinator", "inbox")
	appendRaw(t, coord, `{"type":"task_status_response","from":"backend-dev","to":"coordinator","timestamp":"2026-02-15T11:01:00Z","requestId":"req-98765","content":{"taskId":"a1","status":"in_progress","progress":60}}`+"\n")
	w, err := s.WaitReply(t.Context(), tid, inbox.ReplyCursor{}, inbox.ReplyFilter{RequestID: "req-98765"}, inbox.WaitOptions{Timeout: waitLimit})
	if err != nil || !w.Woke {
		t.Fatalf("wait-reply --request-id: %+v %v; log:\n%s", w, err, br.log)
	}
	if w.Message.Type != "task_status_response" || w.Message.FromAgent != "backend-dev" || w.Message.ThreadID != tid {
		t.Errorf("the response: %+v", w.Message)
	}
	// A line that names no request it knows is a new thread, as before.
	appendRaw(t, coord, `{"type":"task_status_response","from":"backend-dev","to":"coordinator","timestamp":"2026-02-15T11:02:00Z","requestId":"req-unknown","content":{"status":"done"}}`+"\n")
	br.eventually("the unknown response in the store", func() bool {
		items, _ := s.Mailbox(t.Context(), "coordinator", "backend-dev")
		for _, it := range items {
			if it.Message.RequestID == "req-unknown" {
				return it.Message.ThreadID != tid
			}
		}
		return false
	})
	br.handled(t.Context(), s)
	if n := strings.Count(readString(t, coord), "\n"); n != 2 {
		t.Errorf("the coordinator's file has %d lines, want the 2 it was given:\n%s", n, readString(t, coord))
	}
	br.stop()
	os.RemoveAll(filepath.Join(dir, stateDir))
	br = startJSONL(t, s, dir, 0)
	br.handled(t.Context(), s)
	br.swept()
	v, _ := s.Show(t.Context(), tid)
	if len(v.Messages) != 2 {
		t.Errorf("the request's thread has %d messages after a restart without state, want 2", len(v.Messages))
	}
}

// TestJSONLAcknowledgment: an acknowledgment line whose content.ackId
// names a message (its ack id or its message id) settles what the
// acknowledging agent owes, in the message's thread.
func TestJSONLAcknowledgment(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	s.CreateTeam(t.Context(), "lead", "alpha", []string{"coordinator", "backend-dev"})
	br := startJSONL(t, s, dir, 0)
	chosen, err := s.Send(t.Context(), inbox.SendInput{From: "coordinator", To: "backend-dev", Content: inbox.Content{
		Type: "task_assignment", AckRequired: true, AckID: "msg-12345", PayloadJSON: `{"taskId":"a1"}`}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := s.Send(t.Context(), inbox.SendInput{From: "coordinator", To: "backend-dev", Content: inbox.Content{
		Type: "task_assignment", AckRequired: true, PayloadJSON: `{"taskId":"a2"}`}})
	if err != nil {
		t.Fatal(err)
	}
	coord := filepath.Join(dir, "alpha", "members", "coordinator", "inbox")
	for _, id := range []string{"msg-12345", plain.Message.MessageID} {
		appendRaw(t, coord, `{"type":"acknowledgment","from":"backend-dev","to":"coordinator","timestamp":"2026-02-15T10:31:00Z","content":{"ackId":"`+id+`"}}`+"\n")
	}
	br.eventually("nothing owed", func() bool {
		owed, _ := s.Unacknowledged(t.Context(), "backend-dev")
		return len(owed) == 0
	})
	for _, r := range []*inbox.Result{chosen, plain} {
		v, _ := s.Show(t.Context(), r.Thread.ThreadID)
		if len(v.Messages) != 2 || v.Messages[1].Type != inbox.TypeAcknowledgment || inbox.AckedID(v.Messages[1]) != r.Message.AckID {
			t.Errorf("thread %s: %d messages, want the acknowledgment in it", r.Thread.ThreadID, len(v.Messages))
		}
	}
	br.handled(t.Context(), s)
	if n := strings.Count(readString(t, coord), "\n"); n != 2 {
		t.Errorf("the coordinator's file has %d lines, want the 2 it was given:\n%s", n, readString(t, coord))
	}
	// Lost state: the lines are read again, and settle nothing twice.
	br.stop()
	os.RemoveAll(filepath.Join(dir, stateDir))
	br = startJSONL(t, s, dir, 0)
	br.handled(t.Context(), s)
	br.swept()
	for _, r := range []*inbox.Result{chosen, plain} {
		if v, _ := s.Show(t.Context(), r.Thread.ThreadID); len(v.Messages) != 2 {
			t.Errorf("thread %s has %d messages after a restart without state, want 2", r.Thread.ThreadID, len(v.Messages))
		}
	}
}

// TestJSONLRewrittenFile: seed 002's clean-up rewrites the inbox through
// a temp file and mv (jq without -c pretty-prints each line): no line is
// taken in twice, none is logged as malformed, and a line the recipe
// removed is not written back, even by a bridge that lost what it had
// saved since it wrote it.
func TestJSONLRewrittenFile(t *testing.T) {
	s, _ := storetest.New(t, spool.Options{})
	dir := t.TempDir()
	s.CreateTeam(t.Context(), "lead", "alpha", []string{"a", "b"})
	br := startJSONL(t, s, dir, 0)
	p := filepath.Join(dir, "alpha", "members", "b", "inbox")
	var sent []string
	for i, txt := range []string{"old out", "new out"} {
		r, _ := s.Send(t.Context(), inbox.SendInput{From: "a", To: "b", Content: inbox.Content{Body: txt}})
		sent = append(sent, r.Message.MessageID)
		appendRaw(t, p, `{"type":"message","from":"a","to":"b","timestamp":"2026-02-1`+string(rune('5'+i))+`T10:00:00Z","content":{"text":"in `+txt+`"}}`+"\n")
	}
	br.eventually("both in", func() bool { items, _ := s.Mailbox(t.Context(), "b", ""); return len(items) == 4 })
	br.handled(t.Context(), s)
	// While the bridge runs: a jq filter that keeps every line (and
	// pretty-prints it), through a temp file and mv.
	jqRewrite(t, p, func(line []byte) bool { return true })
	appendRaw(t, p, `{"type":"message","from":"a","to":"b","timestamp":"2026-02-17T10:00:00Z","content":{"text":"after"}}`+"\n")
	br.eventually("the new line in", func() bool { items, _ := s.Mailbox(t.Context(), "b", ""); return len(items) == 5 })
	br.swept()
	if items, _ := s.Mailbox(t.Context(), "b", ""); len(items) != 5 {
		t.Errorf("%d messages in b's mailbox after the rewrite, want 5 (a line taken in twice?)", len(items))
	}
	if data, err := os.ReadFile(filepath.Join(filepath.Dir(p), errorsName)); err == nil {
		t.Errorf("errors.log after the rewrite:\n%s", data)
	}
	// A crash before the bridge saved how far it wrote (here: the state
	// saved at its stop is set back), and the recipe removes the old
	// lines before it starts again: it goes over the events again and
	// must not write back what the recipe removed.
	br.stop()
	jqRewrite(t, p, func(line []byte) bool { return !bytes.Contains(line, []byte("old out")) })
	var st map[string]any
	json.Unmarshal([]byte(readString(t, filepath.Join(dir, stateDir, "jsonl.json"))), &st)
	st["out_event"] = 0
	data, _ := json.Marshal(st)
	os.WriteFile(filepath.Join(dir, stateDir, "jsonl.json"), data, 0o600)
	br = startJSONL(t, s, dir, 0)
	br.handled(t.Context(), s)
	br.swept()
	if got := readString(t, p); strings.Contains(got, sent[0]) {
		t.Errorf("the line the recipe removed was written back:\n%s", got)
	}
	if items, _ := s.Mailbox(t.Context(), "b", ""); len(items) != 5 {
		t.Errorf("%d messages in b's mailbox after the restart, want 5", len(items))
	}
	br.stop()
	if fs, err := CheckJSONL(t.Context(), Config{Bus: s, Dir: dir}, false); err != nil || len(fs) != 0 {
		t.Errorf("fsck after the recipe: %+v %v", fs, err)
	}
}

// jqRewrite is seed 002's clean-up: the records keep selects, pretty-printed
// as jq prints them without -c, through a temp file and mv.
func jqRewrite(t *testing.T, p string, keep func(line []byte) bool) {
	t.Helper()
	var kept bytes.Buffer
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	eachRecord(f, func(rec record) {
		if !keep(rec.body) {
			return
		}
		var v any
		if err := json.Unmarshal(rec.body, &v); err != nil {
			t.Fatalf("not JSON: %q", rec.body)
		}
		pretty, _ := json.MarshalIndent(v, "", "  ")
		kept.Write(append(pretty, '\n'))
	})
	f.Close()
	if err := os.WriteFile(p+".tmp", kept.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
}

func readString(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
