package natsserve_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/inbox-dev/inbox/internal/natsserve"
	"github.com/inbox-dev/inbox/internal/testproc"
)

// TestStart checks the server's configuration as it runs: JetStream syncs
// every write (sync_interval: always), it listens where it was told, and
// the store directory is its alone.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	s, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if !s.SyncAlways() {
		t.Error("the server's JetStream does not sync every write")
	}
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") || strings.HasSuffix(s.URL(), ":0") {
		t.Errorf("URL %s, want nats://127.0.0.1:PORT with the port it listens on", s.URL())
	}
	if s.StoreDir() != dir {
		t.Errorf("StoreDir %s, want %s", s.StoreDir(), dir)
	}

	// A second server on the same store directory is refused.
	if _, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: dir}); !errors.Is(err, natsserve.ErrLocked) {
		t.Errorf("a second server on the store directory: %v, want ErrLocked", err)
	}

	// An address in use makes Start fail, and leaves the directory free.
	other := t.TempDir()
	taken := strings.TrimPrefix(s.URL(), "nats://")
	if _, err := natsserve.Start(natsserve.Config{Listen: taken, StoreDir: other}); err == nil {
		t.Errorf("a server on %s, which another listens on, started", taken)
	}
	s2, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: other})
	if err != nil {
		t.Fatalf("a server on the store directory a failed start used: %v", err)
	}
	s2.Stop()
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		listen, host string
		port         int
		bad          bool
	}{
		{listen: natsserve.DefaultListen, host: "127.0.0.1", port: 4222},
		{listen: "127.0.0.1:0", host: "127.0.0.1", port: -1},
		{listen: ":4222", host: "0.0.0.0", port: 4222},
		{listen: "[::1]:5000", host: "::1", port: 5000},
		{listen: "127.0.0.1", bad: true},
		{listen: "127.0.0.1:http", bad: true},
		{listen: "127.0.0.1:70000", bad: true},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			o, err := natsserve.Options(natsserve.Config{Listen: tc.listen, StoreDir: "d"})
			if tc.bad {
				if err == nil {
					t.Fatalf("got options for %q, want an error", tc.listen)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Host != tc.host || o.Port != tc.port || !o.JetStream || !o.SyncAlways || !o.NoSigs {
				t.Errorf("got host %s port %d jetstream %v sync always %v no sigs %v, want %s %d true true true", o.Host, o.Port, o.JetStream, o.SyncAlways, o.NoSigs, tc.host, tc.port)
			}
			if net.ParseIP(o.Host) == nil {
				t.Errorf("host %q is not an address", o.Host)
			}
		})
	}
	if _, err := natsserve.Options(natsserve.Config{Listen: natsserve.DefaultListen}); err == nil {
		t.Error("got options without a store directory, want an error")
	}
}

// lines is a Logger that keeps every line.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.all = append(l.all, s); l.mu.Unlock() }

func (l *lines) Notice(s string) { l.add(s) }
func (l *lines) Warn(s string)   { l.add(s) }
func (l *lines) Error(s string)  { l.add(s) }

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// TestStartSecret checks the server's one way in: the secret it keeps in
// its store directory's owner-only file. A client without it, or with
// another, is refused; one with it is served; the file is made once and
// read again, unchanged, at the next start; and no log line holds it.
func TestStartSecret(t *testing.T) {
	dir := t.TempDir()
	log := new(lines)
	s, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: dir, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Stop() }()
	if want := filepath.Join(dir, natsserve.SecretFile); s.SecretFile() != want {
		t.Errorf("SecretFile %s, want %s", s.SecretFile(), want)
	}
	fi, err := os.Lstat(s.SecretFile())
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("the secret's file has mode %v, want a regular file, -rw-------", fi.Mode())
	}
	data, err := os.ReadFile(s.SecretFile())
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSuffix(string(data), "\n")
	if len(secret) < 32 || strings.ContainsAny(secret, " \n\r\t") {
		t.Fatalf("the secret %q is not one line of at least 32 characters", secret)
	}

	connect := func(opts ...nats.Option) error {
		nc, err := nats.Connect(s.URL(), append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			_, err = nc.RTT()
			nc.Close()
		}
		return err
	}
	if err := connect(); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a client without credentials: %v, want %v", err, nats.ErrAuthorization)
	}
	if err := connect(nats.Token("not-" + secret)); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a client with another token: %v, want %v", err, nats.ErrAuthorization)
	}
	if err := connect(nats.UserInfo("inbox", secret)); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a client with the secret as a user's password: %v, want %v", err, nats.ErrAuthorization)
	}
	if err := connect(nats.Token(secret)); err != nil {
		t.Errorf("a client with the secret as its token: %v, want served", err)
	}

	// A restart reads the same secret: clients keep working.
	s.Stop()
	s, err = natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: dir, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(s.SecretFile())
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(data) {
		t.Errorf("the secret changed at the restart: %q, was %q", again, data)
	}
	if fi, err := os.Lstat(s.SecretFile()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after the restart the secret's file is %v (%v), want -rw-------", fi.Mode(), err)
	}
	if err := connect(nats.Token(secret)); err != nil {
		t.Errorf("after the restart, a client with the secret: %v, want served", err)
	}
	if err := connect(); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("after the restart, a client without credentials: %v, want %v", err, nats.ErrAuthorization)
	}
	if strings.Contains(log.String(), secret) {
		t.Errorf("the server's log holds the secret:\n%s", log)
	}
	if !strings.Contains(log.String(), "authentication error") {
		t.Errorf("the server's log does not say it refused a client (so the check above looked at nothing):\n%s", log)
	}
}

// TestStartPlantedSecret checks that a server never uses a secret's file
// it did not make as it makes it: a symlink (to a file whose secret its
// planter knows), a file others can read, anything but a regular file,
// an empty one. Start fails with ErrSecretFile naming the file and the
// fix, never reading through what was planted, and leaves it in place.
func TestStartPlantedSecret(t *testing.T) {
	known := filepath.Join(t.TempDir(), "known")
	if err := os.WriteFile(known, []byte("planted-secret-0123456789abcdef0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind string
		want string
	}{
		{kind: "symlink", want: "is not a regular file"},
		{kind: "fifo", want: "is not a regular file"},
		{kind: "socket", want: "is not a regular file"},
		{kind: "directory", want: "is not a regular file"},
		{kind: "0644", want: "can be read by others"},
		{kind: "0640", want: "can be read by others"},
		{kind: "0602", want: "can be read by others"},
		{kind: "empty", want: "is empty"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, natsserve.SecretFile)
			switch tc.kind {
			case "directory":
				if err := os.Mkdir(p, 0o700); err != nil {
					t.Fatal(err)
				}
			case "0644", "0640", "0602":
				mode, _ := strconv.ParseUint(tc.kind, 8, 32)
				if err := os.WriteFile(p, []byte("planted-secret-0123456789abcdef0123456789\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, os.FileMode(mode)); err != nil {
					t.Fatal(err)
				}
			case "empty":
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			default:
				testproc.Plant(t, tc.kind, p, known)
			}
			before, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			s, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: dir})
			if err == nil {
				s.Stop()
				t.Fatalf("a server started with a planted %s as its secret's file", tc.kind)
			}
			if !errors.Is(err, natsserve.ErrSecretFile) {
				t.Errorf("error %v, want ErrSecretFile", err)
			}
			for _, want := range []string{p, tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "planted-secret") {
				t.Errorf("error %q holds the planted secret", err)
			}
			after, err := os.Lstat(p)
			if err != nil || after.Mode() != before.Mode() {
				t.Errorf("the planted file is now %v (%v), was %v: leave it for its owner to look at", after.Mode(), err, before.Mode())
			}
			// The directory is free again for a server once the file is
			// gone.
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			s, err = natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: dir})
			if err != nil {
				t.Fatalf("once the planted file is removed: %v", err)
			}
			s.Stop()
		})
	}
}

// TestStartPlantedTemp checks that making the secret never writes
// through what sits at its temporary file's name (a crash's leftover, or
// a symlink planted there): the victim stays as it was, the secret's file
// is a regular file of its own.
func TestStartPlantedTemp(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(dir, natsserve.SecretFile+".tmp")); err != nil {
		t.Fatal(err)
	}
	s, err := natsserve.Start(natsserve.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if got, err := os.ReadFile(victim); err != nil || string(got) != "keep me\n" {
		t.Errorf("the symlink's target now holds %q (%v), want it untouched", got, err)
	}
	if fi, err := os.Lstat(s.SecretFile()); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("the secret's file is %v (%v), want a regular -rw-------", fi.Mode(), err)
	}
	if _, err := os.Lstat(filepath.Join(dir, natsserve.SecretFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file is still there: %v", err)
	}
}
