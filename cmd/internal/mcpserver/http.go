package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
	"github.com/inbox-dev/inbox/cmd/internal/localhttp"
)

// Streamable HTTP (SPEC §12). The server is only as open as the store:
// it listens on loopback; every request carries the bearer token drawn
// at start and written to a file only this user can read, so a local
// user who cannot read that file cannot use the server; a request from a
// web page (an Origin that is not a loopback origin) is refused, as is a
// foreign Host (DNS rebinding); idle sessions are closed (the SDK's
// SessionTimeout); connections are held to localhttp's limits, so that
// connections left open by a user without the token cannot lock its
// owner out.

// defaultIdleTimeout closes a session that has had no request for this
// long, when the configuration gives no other.
const defaultIdleTimeout = 30 * time.Minute

func (m *mcpServer) serveHTTP(ctx context.Context, server *mcp.Server, cfg cli.MCPConfig) error {
	if cfg.TokenFile == "" {
		return errors.New("serve HTTP: no token file")
	}
	idle := cfg.IdleTimeout
	if idle <= 0 {
		idle = defaultIdleTimeout
	}
	ln, err := localhttp.Listen(cfg.HTTP)
	if err != nil {
		return err
	}
	defer ln.Close()
	token, revoke, err := localhttp.IssueToken(cfg.TokenFile)
	if err != nil {
		return err
	}
	defer revoke()
	server.AddReceivingMiddleware(sessionEnds(cfg.Stderr))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{SessionTimeout: idle, Logger: m.log})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/", h)
	bearer := auth.RequireBearerToken(verifyToken(token), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	// The limits of localhttp: idle connections time out, a refused
	// request's connection is closed, and at the bound a newcomer closes
	// a connection that never carried the token, not the owner's.
	srv := localhttp.NewServer(loopbackOnly(bearer(mux)), nil)
	fmt.Fprintf(cfg.Stderr, "inbox mcp: listening on http://%s/mcp\n", ln.Addr())
	fmt.Fprintf(cfg.Stderr, "inbox mcp: token file %s (send \"Authorization: Bearer \" and its content with every request)\n", cfg.TokenFile)
	if err := localhttp.Serve(ctx, srv, ln); err != nil {
		return fmt.Errorf("serve HTTP: %w", err)
	}
	return nil
}

// verifyToken accepts exactly token, comparing in constant time (the
// digests, so that not even the length shows); a request that carries
// it keeps its connection (localhttp.Authorized).
func verifyToken(token string) auth.TokenVerifier {
	return func(_ context.Context, got string, r *http.Request) (*auth.TokenInfo, error) {
		if !localhttp.SameToken(got, token) {
			return nil, auth.ErrInvalidToken
		}
		localhttp.Authorized(r)
		// The user id binds each session to the token that opened it.
		return &auth.TokenInfo{UserID: "owner"}, nil
	}
}

// loopbackOnly refuses (403) a request whose Host is not a loopback name
// (DNS rebinding; the SDK checks it too, after the token) and one whose
// Origin header is there and is not a loopback origin: a web page the
// user visits may send requests to a loopback port, and says where it
// comes from. Checked before the token, a refusal closes the connection.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, _, err := net.SplitHostPort(r.Host); err != nil && !localhttp.IsLoopbackHost(r.Host) || err == nil && !localhttp.IsLoopbackHost(h) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
			return
		}
		if vs, ok := r.Header["Origin"]; ok && (len(vs) != 1 || !localhttp.IsLoopbackOrigin(vs[0])) {
			http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not a loopback origin", strings.Join(vs, ", ")), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sessionEnds says on stderr when a session ends (its client closed it,
// or it was idle too long), once per session.
func sessionEnds(stderr io.Writer) mcp.Middleware {
	var seen sync.Map
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method == "initialize" && err == nil {
				if _, dup := seen.LoadOrStore(ss, true); !dup {
					go func() {
						ss.Wait()
						seen.Delete(ss)
						fmt.Fprintf(stderr, "inbox mcp: session %s ended\n", ss.ID())
					}()
				}
			}
			return res, err
		}
	}
}
