package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/renameio/v2"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
)

// Streamable HTTP (SPEC §12). The server is only as open as the store:
// it listens on loopback; every request carries the bearer token drawn
// at start and written to a file only this user can read, so a local
// user who cannot read that file cannot use the server; a request from a
// web page (an Origin that is not a loopback origin) is refused, as is a
// foreign Host (DNS rebinding: the SDK's own check); idle sessions are
// closed (the SDK's SessionTimeout).

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
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTP, err)
	}
	defer ln.Close()
	// A name such as localhost is resolved by Listen: check what it got.
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err != nil || !ap.Addr().IsLoopback() {
		return fmt.Errorf("listen on %s: got %s, not a loopback address", cfg.HTTP, ln.Addr())
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	if err := writeToken(cfg.TokenFile, token); err != nil {
		return err
	}
	defer removeToken(cfg.TokenFile, token)
	server.AddReceivingMiddleware(sessionEnds(cfg.Stderr))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{SessionTimeout: idle, Logger: m.log})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/", h)
	bearer := auth.RequireBearerToken(verifyToken(token), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	srv := &http.Server{Handler: loopbackOrigin(bearer(mux)), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cfg.Stderr, "inbox mcp: listening on http://%s/mcp\n", ln.Addr())
	fmt.Fprintf(cfg.Stderr, "inbox mcp: token file %s (send \"Authorization: Bearer \" and its content with every request)\n", cfg.TokenFile)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve HTTP: %w", err)
	}
	return nil
}

// newToken draws a bearer token: 32 random bytes, in hex.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("draw a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeToken replaces path atomically with token, readable and writable
// by this user only (0600 whatever was there before), creating its
// directory (0700) if need be.
func writeToken(path, token string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the token file's directory: %w", err)
	}
	pf, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir), renameio.WithStaticPermissions(0o600))
	if err != nil {
		return fmt.Errorf("write the token file: %w", err)
	}
	defer pf.Cleanup()
	if _, err := io.WriteString(pf, token+"\n"); err != nil {
		return fmt.Errorf("write the token file: %w", err)
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("write the token file: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync the token file's directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync the token file's directory: %w", err)
	}
	return nil
}

// removeToken removes the token file if it still holds token (another
// server may have replaced it since). It never follows a symlink or
// blocks on what is not a regular file.
func removeToken(path, token string) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	b := make([]byte, len(token)+2)
	n, _ := io.ReadFull(f, b)
	if strings.TrimSpace(string(b[:n])) == token {
		os.Remove(path)
	}
}

// verifyToken accepts exactly token, comparing in constant time (the
// digests, so that not even the length shows).
func verifyToken(token string) auth.TokenVerifier {
	want := sha256.Sum256([]byte(token))
	return func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			return nil, auth.ErrInvalidToken
		}
		// The user id binds each session to the token that opened it.
		return &auth.TokenInfo{UserID: "owner"}, nil
	}
}

// loopbackOrigin refuses (403) a request whose Origin header is there and
// is not a loopback origin: a web page the user visits may send requests
// to a loopback port, and says where it comes from.
func loopbackOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if vs, ok := r.Header["Origin"]; ok && (len(vs) != 1 || !isLoopbackOrigin(vs[0])) {
			http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not a loopback origin", strings.Join(vs, ", ")), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopbackOrigin reports whether origin is http(s)://HOST[:PORT] with
// HOST localhost or a loopback address (127.0.0.0/8, [::1]).
func isLoopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Opaque != "" ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
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
