package mcpserver

import (
	"strings"
	"testing"
)

// TestMCPIdempotencyConflict: the tools that take idempotency_key follow
// SPEC §4 as the CLI does: the same call again replays, the same key with
// other arguments fails with idempotency_conflict naming the key and what
// differs, and nothing is written either way.
func TestMCPIdempotencyConflict(t *testing.T) {
	mt := newMCPTest(t, "worker", false)
	events := func() int { return len(mt.ok("events", map[string]any{"after_event": 0})["events"].([]any)) }
	send := map[string]any{"from": "leader", "to": "worker", "subject": "Add routes", "idempotency_key": "s-1"}
	tid := get(mt.ok("send", send), "thread.thread_id")
	n := events()
	if r := mt.ok("send", send); r["replayed"] != true || get(r, "thread.thread_id") != tid {
		t.Fatalf("send again: %v, want the first thread replayed", r)
	}
	other := map[string]any{"from": "leader", "to": "worker", "subject": "Add other routes", "idempotency_key": "s-1"}
	e := mt.fails("send", other, "idempotency_conflict")
	if msg, _ := get(e, "error.message").(string); !strings.Contains(msg, `"s-1"`) || !strings.Contains(msg, "subject") {
		t.Errorf("send with another subject: %v, want the key and the subject named", e)
	}
	mt.ok("claim", map[string]any{"thread": tid})
	done := map[string]any{"thread": tid, "summary": "added", "idempotency_key": "d-1"}
	mt.ok("done", done)
	n2 := events()
	if r := mt.ok("done", done); r["replayed"] != true {
		t.Fatalf("done again: %v, want replayed", r)
	}
	e = mt.fails("done", map[string]any{"thread": tid, "summary": "added twice", "idempotency_key": "d-1"}, "idempotency_conflict")
	if msg, _ := get(e, "error.message").(string); !strings.Contains(msg, `"d-1"`) || !strings.Contains(msg, "summary") {
		t.Errorf("done with another summary: %v, want the key and the summary named", e)
	}
	if got := events(); got != n2 || n2 != n+2 {
		t.Fatalf("%d events, then %d, after %d: the retries and conflicts wrote something", n2, got, n)
	}
}
