package webserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/inbox-dev/inbox/cmd/internal/localhttp"
)

// How a browser gets in (SPEC §15, and the issue of the cookie that other
// ports of 127.0.0.1 received). Two kinds of secret:
//   - the bearer token, for scripts (the token file): it opens every
//     endpoint, and the browser never holds it;
//   - launch tokens, each good for one visit: the URL inbox web prints
//     carries one, and POST /api/launch makes another. The first GET / with
//     it is traded for a session and the token dies.
//
// A session is an id and a secret, in this server's memory only (they end
// with it). The cookie carries the id alone: cookies are scoped by host,
// not by port, so every page of another port of 127.0.0.1 may receive
// it, and the id alone opens nothing but the page's shell and assets. The
// secret comes in the HTML of the one answer that made the session; the
// page's script keeps it in its origin's storage (scoped by port, as
// cookies are not) and sends it with every API call (sessionHeader).
type sessions struct {
	mu sync.Mutex
	// launches are the launch tokens not yet used, by their digest.
	launches map[string]*launch
	// byID are the sessions, by the digest of their id.
	byID map[string]*session
	// launchOrder and sessionOrder are the digests in the order they were
	// made, for the bounds (an entry may be gone already).
	launchOrder, sessionOrder []string
}

// launch is a launch token not yet used: pinned ones (the printed URL,
// --open's) are never dropped for newer ones; used is called once it is
// traded.
type launch struct {
	pinned bool
	used   func()
}

type session struct{ id, secret string }

// Bounds of what POST /api/launch and the visits can pile up: past them,
// the oldest launch token (not pinned) or session is dropped.
const (
	maxLaunches = 256
	maxSessions = 1024
)

// sessionHeader carries a session's secret on the page's API calls.
const sessionHeader = "X-Inbox-Session"

func newSessions() *sessions {
	return &sessions{launches: map[string]*launch{}, byID: map[string]*session{}}
}

// digest is the key a secret is looked up by: a map lookup of the secret
// itself would take a time that depends on it.
func digest(s string) string {
	d := sha256.Sum256([]byte(s))
	return string(d[:])
}

// newSecret draws 32 random bytes, in hex.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("draw a secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// newLaunch makes a launch token; used, when set, is called once it is
// traded for a session.
func (ss *sessions) newLaunch(pinned bool, used func()) (string, error) {
	tok, err := newSecret()
	if err != nil {
		return "", err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	k := digest(tok)
	ss.launches[k] = &launch{pinned: pinned, used: used}
	if !pinned {
		ss.launchOrder = append(ss.launchOrder, k)
		for len(ss.launchOrder) > maxLaunches {
			delete(ss.launches, ss.launchOrder[0])
			ss.launchOrder = ss.launchOrder[1:]
		}
	}
	return tok, nil
}

// useLaunch reports whether tok is a launch token not yet used, and uses
// it up.
func (ss *sessions) useLaunch(tok string) bool {
	ss.mu.Lock()
	k := digest(tok)
	l := ss.launches[k]
	delete(ss.launches, k)
	ss.mu.Unlock()
	if l != nil && l.used != nil {
		l.used()
	}
	return l != nil
}

// start is the session of a visit that traded a launch token: the one
// the browser already holds, when one of ids (its cookies) names a live
// session (so that its other tabs go on with the same secret), else a
// new one.
func (ss *sessions) start(ids []string) (*session, error) {
	ss.mu.Lock()
	for _, id := range ids {
		if s := ss.byID[digest(id)]; s != nil {
			ss.mu.Unlock()
			return s, nil
		}
	}
	ss.mu.Unlock()
	id, err := newSecret()
	if err != nil {
		return nil, err
	}
	secret, err := newSecret()
	if err != nil {
		return nil, err
	}
	s := &session{id: id, secret: secret}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	k := digest(id)
	ss.byID[k] = s
	ss.sessionOrder = append(ss.sessionOrder, k)
	for len(ss.sessionOrder) > maxSessions {
		delete(ss.byID, ss.sessionOrder[0])
		ss.sessionOrder = ss.sessionOrder[1:]
	}
	return s, nil
}

// known reports whether one of ids names a live session (what the page's
// shell and assets need).
func (ss *sessions) known(ids []string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, id := range ids {
		if ss.byID[digest(id)] != nil {
			return true
		}
	}
	return false
}

// check reports whether one of ids names a live session whose secret is
// secret (what an API call needs).
func (ss *sessions) check(ids []string, secret string) bool {
	if secret == "" {
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, id := range ids {
		if s := ss.byID[digest(id)]; s != nil && localhttp.SameToken(secret, s.secret) {
			return true
		}
	}
	return false
}
