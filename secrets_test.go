package inbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
)

func TestSplitNATSURL(t *testing.T) {
	for _, tc := range []struct {
		db, secret, public string
		want               inbox.NATSCredentials
	}{
		{"nats://alice:s3cret@h:4222/S", "", "nats://alice@h:4222/S", inbox.NATSCredentials{User: "alice", Password: "s3cret"}},
		// The URL's password wins over the environment's.
		{"nats://alice:s3cret@h:4222/S", "other", "nats://alice@h:4222/S", inbox.NATSCredentials{User: "alice", Password: "s3cret"}},
		{"nats://alice@h:4222/S", "pw", "nats://alice@h:4222/S", inbox.NATSCredentials{User: "alice", Password: "pw"}},
		// A user without a password is a token, as NATS reads it.
		{"nats://TOK@h:4222/S", "", "nats://h:4222/S", inbox.NATSCredentials{Token: "TOK"}},
		{"nats://:TOK@h:4222/S", "", "nats://h:4222/S", inbox.NATSCredentials{Token: "TOK"}},
		{"nats://h:4222/S", "TOK", "nats://h:4222/S", inbox.NATSCredentials{Token: "TOK"}},
		{"nats://h:4222/S", "", "nats://h:4222/S", inbox.NATSCredentials{}},
		{"tls://alice:p%40ss@h1:4222,h2:4222/S?replicas=3", "", "tls://alice@h1:4222,h2:4222/S?replicas=3",
			inbox.NATSCredentials{User: "alice", Password: "p@ss"}},
		{"/home/u/.agents/inbox", "pw", "/home/u/.agents/inbox", inbox.NATSCredentials{}},
	} {
		public, cred := inbox.SplitNATSURL(tc.db, tc.secret)
		if public != tc.public || cred != tc.want {
			t.Errorf("SplitNATSURL(%q, %q) = %q, %+v; want %q, %+v", tc.db, tc.secret, public, cred, tc.public, tc.want)
		}
		// What the public URL and the secret give is what db gave.
		if again, cred2 := inbox.SplitNATSURL(public, cred.Secret()); again != public || cred2 != cred {
			t.Errorf("SplitNATSURL(%q, %q) = %q, %+v; want %q, %+v", public, cred.Secret(), again, cred2, public, cred)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ db, want string }{
		{"nats://alice:s3cretPW@h:4222/S", "nats://alice:xxxxx@h:4222/S"},
		{"nats://TOK@h:4222/S?replicas=3", "nats://xxxxx@h:4222/S?replicas=3"},
		{"nats://h:4222/S", "nats://h:4222/S"},
		{"tls://alice:pw@h1:4222,h2:4222/S", "tls://alice:xxxxx@h1:4222,h2:4222/S"},
		{"store dir", "store dir"},
	} {
		if got := inbox.RedactURL(tc.db); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.db, got, tc.want)
		}
	}
	// A user whose password the environment gives is shown; a token is not.
	if got := inbox.ShowNATSURL("nats://alice@h/S", "pw"); got != "nats://alice:xxxxx@h/S" {
		t.Errorf("ShowNATSURL with a password in the environment = %q", got)
	}
	if got := inbox.ShowNATSURL("nats://TOK@h/S", ""); got != "nats://xxxxx@h/S" {
		t.Errorf("ShowNATSURL of a token = %q", got)
	}
}

func TestNATSSecret(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "s3cret pw\n", 0o600)
	open := file("open", "s3cret\n", 0o644)
	empty := file("empty", "", 0o600)
	for _, tc := range []struct {
		env     map[string]string
		want    string
		wantErr string
	}{
		{map[string]string{}, "", ""},
		{map[string]string{inbox.EnvNATSPassword: "direct"}, "direct", ""},
		{map[string]string{inbox.EnvNATSPassword: "direct", inbox.EnvNATSPasswordFile: good}, "direct", ""},
		{map[string]string{inbox.EnvNATSPasswordFile: good}, "s3cret pw", ""},
		{map[string]string{inbox.EnvNATSPasswordFile: open}, "", "chmod 600"},
		{map[string]string{inbox.EnvNATSPasswordFile: empty}, "", "empty"},
		{map[string]string{inbox.EnvNATSPasswordFile: filepath.Join(dir, "missing")}, "", "missing"},
	} {
		got, err := inbox.NATSSecret(func(k string) string { return tc.env[k] })
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("NATSSecret(%v) = %q, %v; want %q", tc.env, got, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("NATSSecret(%v) = %q, %v; want an error saying %q", tc.env, got, err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("NATSSecret's error shows the secret: %v", err)
		}
	}
}
