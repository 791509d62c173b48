// Package localhttp holds what the store's two HTTP servers (inbox mcp
// --http and inbox web) share to be only as open as the store: a
// listener that must be on loopback, a bearer token drawn at start and
// written to a file only the store's owner can read, and the checks of a
// request's Host and Origin that keep web pages and DNS rebinding out.
package localhttp

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/renameio/v2"
)

// Listen listens on addr and refuses what is not a loopback address: a
// name such as localhost is resolved by the listen, so the check is on
// what it got.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err != nil || !ap.Addr().IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: got %s, not a loopback address", addr, ln.Addr())
	}
	return ln, nil
}

// IssueToken draws a token and writes it to path (WriteSecretFile);
// revoke removes the file if it still holds that token.
func IssueToken(path string) (token string, revoke func(), err error) {
	if token, err = newToken(); err != nil {
		return "", nil, err
	}
	if err := WriteSecretFile(path, token+"\n"); err != nil {
		return "", nil, fmt.Errorf("write the token file: %w", err)
	}
	return token, func() { RemoveIfHolds(path, token+"\n") }, nil
}

// newToken draws a bearer token: 32 random bytes, in hex.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("draw a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// WriteSecretFile replaces path atomically with content, readable and
// writable by this user only (0600 whatever was there before), creating
// its directory (0700) if need be.
func WriteSecretFile(path, content string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	pf, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir), renameio.WithStaticPermissions(0o600))
	if err != nil {
		return err
	}
	defer pf.Cleanup()
	if _, err := io.WriteString(pf, content); err != nil {
		return err
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// RemoveIfHolds removes the file at path if it still holds content
// (another server may have replaced it since). It never follows a
// symlink or blocks on what is not a regular file.
func RemoveIfHolds(path, content string) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(content)) {
		return
	}
	b := make([]byte, len(content)+1)
	n, _ := io.ReadFull(f, b)
	if string(b[:n]) == content {
		os.Remove(path)
	}
}

// SameToken reports whether got is token, comparing in constant time
// (the digests, so that not even the length shows).
func SameToken(got, token string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// IsLoopbackOrigin reports whether origin is http(s)://HOST[:PORT] with
// HOST localhost or a loopback address (127.0.0.0/8, [::1]).
func IsLoopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Opaque != "" ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	return IsLoopbackHost(u.Hostname())
}

// IsLoopbackHost reports whether host (no port) is localhost or a
// loopback address.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && ip.IsLoopback()
}
