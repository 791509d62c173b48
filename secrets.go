package inbox

import (
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
)

// Secrets of NATS stores (SPEC §8, §14). A store URL may carry them
// (nats://USER:PASSWORD@HOST:PORT/NAME, or nats://TOKEN@… as NATS reads a
// user without a password), but they never appear in an error message, a
// log line, a process's argv, a task's environment or a settings file:
// they travel in the environment (EnvNATSPassword) or in an owner-only
// file (EnvNATSPasswordFile), and URLs are shown with them replaced by
// xxxxx. NATS's own credentials files (creds=FILE, nkey=FILE in the URL,
// or NATS_CREDS, NATS_NKEY) are named by path and are never secrets
// themselves.

const (
	// EnvNATSPassword is the environment variable that carries a NATS
	// store's secret: the password of the user its URL names, or the
	// token when the URL names no user.
	EnvNATSPassword = "INBOX_NATS_PASSWORD"
	// EnvNATSPasswordFile names a file that holds that secret (its first
	// line), readable by its owner only. Tasks get this, never the secret.
	EnvNATSPasswordFile = "INBOX_NATS_PASSWORD_FILE"
)

// redacted stands for a secret in a URL that is shown.
const redacted = "xxxxx"

// maxSecretFile bounds what is read of a secret's file.
const maxSecretFile = 64 << 10

// NATSCredentials is how a NATS store URL and the environment's secret
// authenticate: a user and password, a token, or neither.
type NATSCredentials struct {
	User, Password string
	Token          string
}

// Secret is what has to travel apart from the URL: the password or the
// token.
func (c NATSCredentials) Secret() string {
	if c.User != "" {
		return c.Password
	}
	return c.Token
}

// isNATSURL reports whether db names a NATS store (nats:// or tls://).
func isNATSURL(db string) bool {
	return strings.HasPrefix(db, "nats://") || strings.HasPrefix(db, "tls://")
}

// SplitNATSURL separates a NATS store URL from its secret: public is db
// without it, and cred says how to authenticate, given secret, the one
// the environment carries (NATSSecret). A password in the URL wins over
// secret; a user with no password in the URL is a user whose password is
// secret, or, when secret is empty, a token (as NATS reads it). Anything
// but a NATS URL is returned as it is, with no credentials.
func SplitNATSURL(db, secret string) (public string, cred NATSCredentials) {
	u, err := url.Parse(db)
	if !isNATSURL(db) || err != nil {
		return db, NATSCredentials{}
	}
	if u.User == nil {
		if secret != "" {
			cred.Token = secret
		}
		return db, cred
	}
	user := u.User.Username()
	pass, hasPass := u.User.Password()
	switch {
	case user != "" && hasPass && pass != "":
		cred = NATSCredentials{User: user, Password: pass}
		u.User = url.User(user)
	case user != "" && !hasPass && secret != "":
		return db, NATSCredentials{User: user, Password: secret}
	case !hasPass || pass == "":
		cred.Token = user // nats://TOKEN@…
		u.User = nil
	default:
		cred.Token = pass // nats://:TOKEN@…
		u.User = nil
	}
	return u.String(), cred
}

// RedactURL returns db as it may be shown: a NATS URL with its password
// replaced by xxxxx (nats://alice:xxxxx@host:4222/NAME), as is a user
// given without a password, which NATS reads as a token
// (nats://xxxxx@host:4222/NAME). Anything else is returned as it is.
func RedactURL(db string) string { return ShowNATSURL(db, "") }

// ShowNATSURL is RedactURL for a process whose environment carries
// secret: a user whose password it is is shown, with xxxxx for the
// password.
func ShowNATSURL(db, secret string) string {
	public, cred := SplitNATSURL(db, secret)
	if public == db && cred.Secret() == "" {
		return db
	}
	u, err := url.Parse(public)
	if err != nil {
		return public
	}
	switch {
	case cred.User != "":
		u.User = url.UserPassword(cred.User, redacted)
	case cred.Token != "" && public != db:
		u.User = url.User(redacted) // the token was in the URL
	}
	return u.String()
}

// NATSSecret returns the secret of a NATS store that the environment
// getenv reads carries: EnvNATSPassword, else the first line of the file
// EnvNATSPasswordFile names, which only its owner may read; "" when
// neither is set.
func NATSSecret(getenv func(string) string) (string, error) {
	if s := getenv(EnvNATSPassword); s != "" {
		return s, nil
	}
	p := getenv(EnvNATSPasswordFile)
	if p == "" {
		return "", nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", Errorf(ErrInvalidInput, "invalid_input", "", "%s: %v", EnvNATSPasswordFile, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", Errorf(ErrInvalidInput, "invalid_input", "", "%s: %v", EnvNATSPasswordFile, err)
	}
	if !fi.Mode().IsRegular() {
		return "", Errorf(ErrInvalidInput, "invalid_input", "", "%s %s is not a regular file", EnvNATSPasswordFile, p)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", Errorf(ErrInvalidInput, "invalid_input", "",
			"%s %s can be read by others (mode %04o): it holds a secret; chmod 600 it", EnvNATSPasswordFile, p, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile))
	if err != nil {
		return "", Errorf(ErrInvalidInput, "invalid_input", "", "%s: %v", EnvNATSPasswordFile, err)
	}
	s, _, _ := strings.Cut(string(data), "\n")
	s = strings.TrimSuffix(s, "\r")
	if s == "" {
		return "", Errorf(ErrInvalidInput, "invalid_input", "", "%s %s is empty: write the secret on its first line", EnvNATSPasswordFile, p)
	}
	return s, nil
}

// WithoutEnv returns environ without the variables keys names: what a
// child process gets when it must not inherit a secret or a store.
func WithoutEnv(environ []string, keys ...string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(keys, name) {
			out = append(out, kv)
		}
	}
	return out
}
