package webserver

import (
	"net/http"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/cmd/internal/localhttp/localhttptest"
)

// TestConnectionFlood: a local user without the token who keeps 20,000
// connections open, each after a request refused with 401, does not lock
// the owner out: a request with the token is answered.
func TestConnectionFlood(t *testing.T) {
	db := newStore(t)
	d := startDashboard(t, db)
	addr := strings.TrimPrefix(d.base, "http://")
	localhttptest.Flood(t, addr, 20_000, "GET /api/agents HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	st, body := localhttptest.OwnerRequest(t, func() *http.Request {
		req, _ := http.NewRequest("GET", d.base+"/api/agents", nil)
		req.Header.Set("Authorization", "Bearer "+d.token)
		return req
	})
	if st != http.StatusOK || !strings.Contains(body, `"command":"agents"`) {
		t.Errorf("the owner's GET /api/agents during the flood: %d %s", st, body)
	}
}
