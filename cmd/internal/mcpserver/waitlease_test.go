package mcpserver

import (
	"testing"
)

// TestMCPWaitNoAgent: wait_reply on a server with no agent, given no
// cursor (seed 000's flag set), returns the answer to the thread's last
// question even when it landed before the call.
func TestMCPWaitNoAgent(t *testing.T) {
	mt := newMCPTest(t, "", false)
	sent := mt.ok("send", map[string]any{"from": "leader", "to": "worker", "subject": "Add routes"})
	tid := get(sent, "thread.thread_id").(string)
	mt.ok("claim", map[string]any{"agent": "worker", "thread": tid})
	mt.ok("update", map[string]any{"agent": "worker", "thread": tid, "status": "blocked", "summary": "which auth?"})
	a := mt.ok("reply", map[string]any{"from": "leader", "thread": tid, "kind": "answer", "summary": "email/password"})
	w := mt.ok("wait_reply", map[string]any{"thread": tid, "max_wait_seconds": 0})
	if w["woke"] != true || get(w, "message.message_id") != get(a, "message.message_id") {
		t.Fatalf("wait_reply after the answer landed: %v, want %v", w, get(a, "message.message_id"))
	}
}
