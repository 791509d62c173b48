package mcpserver

import (
	"testing"
	"time"

	"github.com/inbox-dev/inbox"
)

// TestMCPWaitKeepsLease: the holder (the server's agent) waits in
// wait_reply, one call after another as a client does (each at most
// max_wait_seconds), three times its 2 s lease, and then finishes with
// its token: its waits renewed the lease, no more than once per third of
// its length. A wait_reply naming another agent renews nothing.
func TestMCPWaitKeepsLease(t *testing.T) {
	mt := newMCPTest(t, "worker", false)
	const secs = 2
	lease := secs * time.Second
	claim := func(subject string) (string, any) {
		sent := mt.ok("send", map[string]any{"from": "leader", "to": "worker", "subject": subject})
		tid := get(sent, "thread.thread_id").(string)
		token := get(mt.ok("claim", map[string]any{"thread": tid, "lease_seconds": secs}), "lease.lease_token")
		mt.ok("update", map[string]any{"thread": tid, "status": "blocked", "summary": "which auth?", "lease_token": token})
		return tid, token
	}
	tid, token := claim("held while its holder waits")
	other, _ := claim("waited on by the leader")
	began := time.Now()
	for time.Since(began) < 3*lease {
		if w := mt.ok("wait_reply", map[string]any{"thread": tid, "lease_token": token, "max_wait_seconds": 1.5}); w["woke"] != false {
			t.Fatalf("wait_reply woke with nothing to wake it: %v", w)
		}
		if w := mt.ok("wait_reply", map[string]any{"thread": other, "agent": "leader", "max_wait_seconds": 0.5}); w["woke"] != false {
			t.Fatalf("the leader's wait_reply woke with nothing to wake it: %v", w)
		}
	}
	waited := time.Since(began)
	mt.ok("done", map[string]any{"thread": tid, "summary": "routes added", "lease_token": token})
	mt.fails("done", map[string]any{"thread": other, "summary": "too late"}, "lease_expired")
	renews := map[string]int{}
	if err := mt.bus.Events(t.Context(), 0, func(ev *inbox.Event) bool {
		if ev.EventType == inbox.EventLeaseRenewed {
			renews[ev.ThreadID]++
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if most := int(waited / (lease / 3)); renews[tid] == 0 || renews[tid] > most {
		t.Errorf("%v of wait_reply calls renewed a %v lease %d times, want 1 to %d", waited, lease, renews[tid], most)
	}
	if renews[other] != 0 {
		t.Errorf("the leader's wait_reply renewed the worker's lease %d times", renews[other])
	}
}

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
