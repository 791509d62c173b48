package inbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
)

// TestIdemArgs: a key's call repeated exactly passes; any argument
// changed, added or left out is an idempotency_conflict naming it (all of
// them when several differ); a key recorded without arguments (an older
// version's) passes anything.
func TestIdemArgs(t *testing.T) {
	base := inbox.SendInput{From: "leader", To: "w", Subject: "s", RunID: "r", TaskID: "t", Kind: "task", Priority: "normal",
		Content: inbox.Content{Summary: "sum", Body: "b", PayloadJSON: `{"a":1}`, IdempotencyKey: "k",
			Artifacts: []inbox.ArtifactInput{{Path: "p", Kind: "file"}}}}
	rec := inbox.NewThreadArgs(base)
	if rec == "" {
		t.Fatal("NewThreadArgs is empty")
	}
	if err := inbox.CheckIdemArgs("k", rec, inbox.NewThreadArgs(base)); err != nil {
		t.Fatalf("the same call: %v", err)
	}
	for _, tc := range []struct {
		field  string
		change func(*inbox.SendInput)
	}{
		{"from", func(in *inbox.SendInput) { in.From = "other" }},
		{"to", func(in *inbox.SendInput) { in.To = "w,x" }},
		{"subject", func(in *inbox.SendInput) { in.Subject = "s2" }},
		{"run", func(in *inbox.SendInput) { in.RunID = "" }},
		{"task", func(in *inbox.SendInput) { in.TaskID = "t2" }},
		{"kind", func(in *inbox.SendInput) { in.Kind = "question" }},
		{"priority", func(in *inbox.SendInput) { in.Priority = "high" }},
		{"summary", func(in *inbox.SendInput) { in.Summary = "" }},
		{"body", func(in *inbox.SendInput) { in.Body = "b2" }},
		{"payload_json", func(in *inbox.SendInput) { in.PayloadJSON = `{"a":2}` }},
		{"artifact", func(in *inbox.SendInput) { in.Artifacts = append(in.Artifacts, inbox.ArtifactInput{Path: "q"}) }},
		{"artifact", func(in *inbox.SendInput) { in.Artifacts = []inbox.ArtifactInput{{Path: "p", Kind: "log"}} }},
		{"type", func(in *inbox.SendInput) { in.Type = "plan" }},
		{"request", func(in *inbox.SendInput) { in.Request = true }},
		{"ack_required", func(in *inbox.SendInput) { in.AckRequired = true }},
	} {
		in := base
		tc.change(&in)
		err := inbox.CheckIdemArgs("k", rec, inbox.NewThreadArgs(in))
		var ie *inbox.Error
		if !errors.As(err, &ie) || !errors.Is(err, inbox.ErrIdempotencyMismatch) {
			t.Fatalf("%s changed: got %v, want an idempotency conflict", tc.field, err)
		}
		want := `"k" was first used with another {` + tc.field + `}: `
		if ie.Code != "idempotency_conflict" || ie.Field != "idempotency_key" || !strings.HasPrefix(ie.Rule, want) {
			t.Errorf("%s changed: got %s %s %q, want idempotency_conflict idempotency_key %q…", tc.field, ie.Code, ie.Field, ie.Rule, want)
		}
	}

	in := base
	in.Subject, in.Body = "s2", "b2"
	err := inbox.CheckIdemArgs("k", rec, inbox.NewThreadArgs(in))
	if err == nil || !strings.Contains(err.Error(), "another subject and body:") {
		t.Errorf("two changed: got %v, want both named", err)
	}
	in.Priority = "high"
	err = inbox.CheckIdemArgs("k", rec, inbox.NewThreadArgs(in))
	if err == nil || !strings.Contains(err.Error(), "another subject, priority and body:") {
		t.Errorf("three changed: got %v, want all named", err)
	}

	// An older version's record has no arguments: anything repeats it.
	if err := inbox.CheckIdemArgs("k", "", inbox.NewThreadArgs(in)); err != nil {
		t.Errorf("a record without arguments: %v, want nil", err)
	}
	// The key is not an argument of its call.
	in = base
	in.IdempotencyKey = "other"
	if got := inbox.NewThreadArgs(in); got != rec {
		t.Errorf("another key: args %q, want %q", got, rec)
	}
	// A body inline and the same body as a blob are the same argument.
	sum := sha256.Sum256([]byte("b"))
	in = base
	in.Body, in.Blobs = "", []*inbox.Blob{{Field: "body", SHA256: hex.EncodeToString(sum[:])}}
	if got := inbox.NewThreadArgs(in); got != rec {
		t.Errorf("body as a blob: args %q, want %q", got, rec)
	}
	// No key, nothing to remember.
	in.IdempotencyKey = ""
	if got := inbox.NewThreadArgs(in); got != "" {
		t.Errorf("no key: args %q, want none", got)
	}
}

// TestIdemArgsPerCommand: each command's arguments by their names.
func TestIdemArgsPerCommand(t *testing.T) {
	c := inbox.Content{Summary: "why", IdempotencyKey: "k"}
	c2 := c
	c2.Summary = "other"
	for _, tc := range []struct {
		name      string
		rec, call string
		field     string
	}{
		{"reply", inbox.MessageArgs("a", "b", "answer", c), inbox.MessageArgs("a", "b", "answer", c2), "summary"},
		{"reply to", inbox.MessageArgs("a", "b", "answer", c), inbox.MessageArgs("a", "", "answer", c), "to"},
		{"update", inbox.HolderArgs("w", "in_progress", c), inbox.HolderArgs("w", "blocked", c), "status"},
		{"done", inbox.HolderArgs("w", "", c), inbox.HolderArgs("x", "", c), "agent"},
		{"cancel", inbox.CancelArgs("l", c), inbox.CancelArgs("l", c2), "reason"},
		{"cancel task", inbox.CancelTaskArgs("l", c), inbox.CancelTaskArgs("l", c2), "reason"},
	} {
		err := inbox.CheckIdemArgs("k", tc.rec, tc.call)
		if err == nil || !strings.Contains(err.Error(), "another "+tc.field+":") {
			t.Errorf("%s: got %v, want {%s} named", tc.name, err, tc.field)
		}
	}
	// A task's cancel does not weigh the output it gathers.
	more := c
	more.PayloadJSON, more.Blobs = `{"partial_output":"longer"}`, []*inbox.Blob{{Field: "partial_output", SHA256: "ab"}}
	if err := inbox.CheckIdemArgs("k", inbox.CancelTaskArgs("l", c), inbox.CancelTaskArgs("l", more)); err != nil {
		t.Errorf("cancel task with more output: %v, want nil", err)
	}
}
