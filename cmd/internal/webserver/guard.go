package webserver

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/inbox-dev/inbox/cmd/internal/localhttp"
)

// guard lets a request through only when it is for this server and
// carries what opens it (session.go):
//   - Host must be a loopback name with this server's port (a foreign
//     Host is DNS rebinding: 403);
//   - an Origin, when there is one, must be this server's own origin (a
//     web page elsewhere, another local port included: 403); a request
//     without one (a script) goes on;
//   - "Authorization: Bearer TOKEN" opens everything;
//   - an API call (/api/…, the stream included) needs a session: its id
//     in the cookie and its secret in the X-Inbox-Session header;
//   - GET /?token=LAUNCH trades a launch token (or the bearer token) for
//     a session: the answer sets the cookie and carries the secret in the
//     page;
//   - the page's shell and assets need the cookie of a live session;
//
// anything else is 401. A refused request closes its connection; one
// with the token or a session's secret is the owner's (localhttp).
func (s *server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.ownHost(r.Host) {
			writeError(w, http.StatusForbidden, "web", "forbidden_host", "Host",
				"Host "+strconv.Quote(r.Host)+" is not this server's loopback address")
			return
		}
		if vs, ok := r.Header["Origin"]; ok && (len(vs) != 1 || !s.ownOrigin(vs[0])) {
			writeError(w, http.StatusForbidden, "web", "forbidden_origin", "Origin",
				"Origin "+strconv.Quote(strings.Join(vs, ", "))+" is not this server's origin")
			return
		}
		if _, ok := r.Header["Authorization"]; ok {
			if !s.bearer(r) {
				s.unauthorized(w, r)
				return
			}
			localhttp.Authorized(r)
			next.ServeHTTP(w, r)
			return
		}
		ids := s.cookieIDs(r)
		if strings.HasPrefix(r.URL.Path, "/api/") {
			if !s.sessions.check(ids, r.Header.Get(sessionHeader)) {
				s.unauthorized(w, r)
				return
			}
			localhttp.Authorized(r)
			next.ServeHTTP(w, r)
			return
		}
		if tok := r.URL.Query().Get("token"); r.Method == http.MethodGet && r.URL.Path == "/" && tok != "" &&
			(localhttp.SameToken(tok, s.token) || s.sessions.useLaunch(tok)) {
			sess, err := s.sessions.start(ids)
			if err != nil {
				writeErr(w, "web", err)
				return
			}
			localhttp.Authorized(r)
			securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: sess.id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				s.servePage(w, sess.secret)
			})).ServeHTTP(w, r)
			return
		}
		if s.sessions.known(ids) {
			localhttp.KeepAlive(r)
			next.ServeHTTP(w, r)
			return
		}
		s.unauthorized(w, r)
	})
}

// bearer reports whether r carries "Authorization: Bearer TOKEN".
func (s *server) bearer(r *http.Request) bool {
	scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && localhttp.SameToken(strings.TrimSpace(t), s.token)
}

// cookieIDs are the values of every cookie named for this server (a page
// of another port may set one of the same name beside the real one).
func (s *server) cookieIDs(r *http.Request) []string {
	var ids []string
	for _, c := range r.CookiesNamed(s.cookie) {
		ids = append(ids, c.Value)
	}
	return ids
}

// unauthorized answers 401: the API's error shape, or a line of text for
// the page.
func (s *server) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="inbox web"`)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeError(w, http.StatusUnauthorized, "web", "unauthorized", "token",
			"this server needs its token: send \"Authorization: Bearer TOKEN\" (the token file inbox web printed); "+
				"a browser opens a launch URL (inbox web prints one; POST /api/launch with the token makes another)")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte("401 Unauthorized: open a launch URL of inbox web. It prints one at start; each opens the dashboard in one browser, once. " +
		"POST /api/launch with \"Authorization: Bearer \" and the token file's content answers another.\n"))
}

// ownHost reports whether host (HOST:PORT from the request) names this
// server: a loopback name and this server's port.
func (s *server) ownHost(host string) bool {
	h, p, err := net.SplitHostPort(host)
	return err == nil && p == strconv.Itoa(s.port) && localhttp.IsLoopbackHost(h)
}

// ownOrigin reports whether origin is this server's: http, a loopback
// name, this port.
func (s *server) ownOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && localhttp.IsLoopbackOrigin(origin) && u.Port() == strconv.Itoa(s.port)
}

// securityHeaders keep the page to its own origin: scripts, styles,
// images and connections from this server only, never framed, never
// sending a referrer (which would carry a launch token on a first visit).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}
