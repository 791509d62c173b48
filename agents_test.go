package inbox

import (
	"encoding/json"
	"testing"
)

// TestIdleReason reads the reason of an idle notification as seed 002
// writes it ("reason") and as Claude Code does ("idleReason").
func TestIdleReason(t *testing.T) {
	for _, tc := range []struct{ payload, want string }{
		{`{"reason":"waiting for review"}`, "waiting for review"},
		{`{"type":"idle_notification","from":"researcher","idleReason":"available"}`, "available"},
		{`{"reason":"seed","idleReason":"claude"}`, "seed"},
		{`{}`, ""},
	} {
		m := &Message{Type: TypeIdleNotification, PayloadJSON: json.RawMessage(tc.payload)}
		if got := IdleReason(m); got != tc.want {
			t.Errorf("IdleReason(%s) = %q, want %q", tc.payload, got, tc.want)
		}
	}
}
