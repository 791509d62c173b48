package natsserve

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SecretFile is the file in the store directory that holds the server's
// secret, the token every client must give (a client reads it through
// INBOX_NATS_PASSWORD_FILE): one line, readable by its owner only. Start
// makes it when it is missing and keeps it across restarts.
const SecretFile = "inbox-nats-server.secret"

// ErrSecretFile is returned by Start when the secret's file is not as a
// server makes it: a symlink or anything but a regular file, a file
// others can read or that another user owns, an empty one. Start never
// reads through it nor replaces it; its owner looks at it and removes it,
// and the next start makes a new secret.
var ErrSecretFile = errors.New("the server's secret file")

// secretBytes is how much randomness a secret holds: 256 bits.
const secretBytes = 32

// maxSecretLine bounds what is read of the secret's file.
const maxSecretLine = 4 << 10

// loadSecret returns the secret kept in dir's SecretFile, making the file
// (once) when it is missing, and the file's path. The caller holds dir's
// lock, so no other server makes it at the same time.
func loadSecret(dir string) (secret, path string, err error) {
	path = filepath.Join(dir, SecretFile)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		secret, err = makeSecret(path)
		return secret, path, err
	}
	if err != nil {
		return "", path, fmt.Errorf("%w %s: %w", ErrSecretFile, path, err)
	}
	if err := checkSecretFile(path, fi); err != nil {
		return "", path, err
	}
	// Opened without following a link nor blocking on a FIFO, and checked
	// again as opened: what is read is the file just checked.
	f, err := openNoFollow(path)
	if err != nil {
		return "", path, fmt.Errorf("%w %s: %w", ErrSecretFile, path, err)
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return "", path, fmt.Errorf("%w %s: %w", ErrSecretFile, path, err)
	}
	if err := checkSecretFile(path, ofi); err != nil {
		return "", path, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretLine))
	if err != nil {
		return "", path, fmt.Errorf("%w %s: %w", ErrSecretFile, path, err)
	}
	// Read as a client reads it (inbox.NATSSecret): its first line.
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", path, fmt.Errorf("%w %s is empty: remove it, and the next start makes a new secret", ErrSecretFile, path)
	}
	return line, path, nil
}

// checkSecretFile says what is wrong with fi, the secret's file at path,
// with the fix; nil when it is a regular file only its owner, this user,
// can read.
func checkSecretFile(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w %s is not a regular file (%s): a server never reads through one; remove it, and the next start makes a new secret",
			ErrSecretFile, path, kind(fi.Mode()))
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w %s can be read by others (mode %04o): it holds the secret every client gives, which they may have read; remove it, and the next start makes a new one (or chmod 600 it to keep this one)",
			ErrSecretFile, path, perm)
	}
	if err := ownedBySelf(fi); err != nil {
		return fmt.Errorf("%w %s %v: a server uses only a secret its own user made; remove it, and the next start makes a new one", ErrSecretFile, path, err)
	}
	return nil
}

// kind names a file mode's type.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + m.String()
	}
}

// makeSecret writes a new random secret to path, whole or not at all:
// written to a temporary file beside it, made owner-only and synced, then
// renamed into place.
func makeSecret(path string) (string, error) {
	b := make([]byte, secretBytes)
	rand.Read(b)
	secret := base64.RawURLEncoding.EncodeToString(b)
	tmp := path + ".tmp"
	// A temporary file a crash left behind (or anything planted there) is
	// removed, never written through: O_EXCL does not follow a symlink.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w %s: %w", ErrSecretFile, path, err)
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("%w %s: make it: %w", ErrSecretFile, path, err)
	}
	err = f.Chmod(0o600) // whatever the umask
	if err == nil {
		_, err = f.WriteString(secret + "\n")
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("%w %s: make it: %w", ErrSecretFile, path, err)
	}
	return secret, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
