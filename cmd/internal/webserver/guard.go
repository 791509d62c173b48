package webserver

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/inbox-dev/inbox/cmd/internal/localhttp"
)

// guard lets a request through only when it is for this server and
// carries this start's token:
//   - Host must be a loopback name with this server's port (a foreign
//     Host is DNS rebinding: 403);
//   - an Origin, when there is one, must be this server's own origin (a
//     web page elsewhere, another local port included: 403); a request
//     without one (a script) goes on;
//   - the token comes as "Authorization: Bearer TOKEN", as the cookie a
//     first visit set, or as ?token= (which sets the cookie; on the page
//     itself the address is then cleaned of it); without it, 401.
func (s *server) guard(next http.Handler) http.Handler {
	cookie := "inbox_web_" + strconv.Itoa(s.port) // cookies do not tell ports apart
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
		if t := r.URL.Query().Get("token"); t != "" && localhttp.SameToken(t, s.token) {
			http.SetCookie(w, &http.Cookie{Name: cookie, Value: s.token, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Expires: time.Now().Add(30 * 24 * time.Hour)})
			if r.Method == http.MethodGet && r.URL.Path == "/" {
				q := r.URL.Query()
				q.Del("token")
				u := url.URL{Path: "/", RawQuery: q.Encode()}
				http.Redirect(w, r, u.String(), http.StatusSeeOther)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if s.authorized(r, cookie) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="inbox web"`)
		if strings.HasPrefix(r.URL.Path, "/api/") {
			writeError(w, http.StatusUnauthorized, "web", "unauthorized", "token",
				"this server needs its token: send \"Authorization: Bearer TOKEN\" (the token file inbox web printed)")
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte("401 Unauthorized: open the URL inbox web printed (it carries the token).\n"))
	})
}

// authorized reports whether r carries the token as a bearer token or
// in the cookie.
func (s *server) authorized(r *http.Request, cookie string) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, ok := strings.Cut(h, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && localhttp.SameToken(strings.TrimSpace(t), s.token)
	}
	c, err := r.Cookie(cookie)
	return err == nil && localhttp.SameToken(c.Value, s.token)
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
// sending a referrer (which would carry the token on a first visit).
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
