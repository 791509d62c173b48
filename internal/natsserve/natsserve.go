// Package natsserve runs a NATS server with JetStream configured as an
// inbox store on nats:// needs it (SPEC §14, docs/JETSTREAM.md): JetStream
// enabled, its streams kept in one store directory, and every write synced
// to disk before it is acknowledged (the server's sync_interval: always).
// `inbox-nats server` runs one for a newcomer or a single machine; the
// tests' and benchmarks' server processes (internal/natsd) start from the
// same Options.
//
// # Guarantees
//
//   - An acknowledged change is on the store directory's disk: it survives
//     the server's crash (kill -9) and a power cut.
//   - One server at a time uses a store directory: Start takes a lock on a
//     file in it (ErrLocked when another server holds it), so two servers
//     never write the same stream files.
//   - A server that cannot start (its address taken, a store directory it
//     cannot use) makes Start return an error, instead of a server that
//     never becomes ready.
//   - Every client gives the server's secret, or is refused (NATS's
//     "Authorization Violation"): a random token Start makes once, in the
//     store directory's owner-only SecretFile, and reads again at every
//     start, so clients keep working across restarts. A client reads the
//     same file through INBOX_NATS_PASSWORD_FILE; the secret itself is in
//     no argument, log line or error. Start refuses a secret's file it
//     did not make so (ErrSecretFile): a symlink, anything but a regular
//     file, a file others can read or another user owns.
//
// # Caveats
//
//   - No TLS: the secret and every message cross the network in clear.
//     On a loopback address only this machine's users see that traffic,
//     and only the store directory's owner can read the secret. A server
//     other machines reach should be a nats-server configured with
//     accounts and TLS (docs/JETSTREAM.md).
//   - One token, one account: whoever has the secret reads and changes
//     every store on the server.
//   - One server, so replicas=1: a store on it is down while it is.
package natsserve

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultListen is where a server listens unless told otherwise: NATS's
// own port, on loopback only.
const DefaultListen = "127.0.0.1:4222"

// LockFile is the file in the store directory that a running server keeps
// locked.
const LockFile = "inbox-nats-server.lock"

// ErrLocked is returned by Start when another server already uses the
// store directory.
var ErrLocked = errors.New("another server uses this store directory")

// Config says where a server listens and stores.
type Config struct {
	// Listen is HOST:PORT; port 0 is any free port (Server.URL says which).
	Listen string
	// StoreDir is the directory JetStream keeps its streams in (made when
	// missing).
	StoreDir string
	// Log receives the server's own log lines; nil drops them.
	Log Logger
	// ReadyWithin bounds how long Start waits for the server to accept
	// connections (30 s when zero).
	ReadyWithin time.Duration
}

// Logger receives the NATS server's log lines by level.
type Logger interface {
	// Notice is a line about normal operation (where it listens, a stream
	// restored).
	Notice(line string)
	// Warn is a line about something that needs a look.
	Warn(line string)
	// Error is a line about a failure.
	Error(line string)
}

// Options are the NATS server options for cfg: JetStream in cfg.StoreDir,
// every write synced, listening on cfg.Listen, no signal handlers of its
// own (the caller stops the server). They require no credentials: Start
// adds the secret; the tests' own servers (internal/natsd) run without.
func Options(cfg Config) (*server.Options, error) {
	host, port, err := SplitListen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	if cfg.StoreDir == "" {
		return nil, errors.New("the store directory is empty")
	}
	dir, err := filepath.Abs(cfg.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("store directory %s: %w", cfg.StoreDir, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return &server.Options{
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: true,
		NoSigs:     true,
	}, nil
}

// SplitListen splits a HOST:PORT listen address; HOST may be empty (every
// interface) and PORT 0 (any free port).
func SplitListen(listen string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("listen address %q: %w (want HOST:PORT, such as %s)", listen, err, DefaultListen)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("listen address %q: the port is not a number from 0 to 65535", listen)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// Server is a running NATS server with JetStream.
type Server struct {
	s      *server.Server
	dir    string
	secret string // the path of the secret's file
	unlock func()
}

// Start starts a server as cfg says and returns it once it accepts
// connections, from clients that give the secret in the store directory's
// SecretFile only (made when missing).
func Start(cfg Config) (*Server, error) {
	opts, err := Options(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("store directory: %w", err)
	}
	unlock, err := lockDir(filepath.Join(opts.StoreDir, LockFile))
	if err != nil {
		return nil, fmt.Errorf("store directory %s: %w", opts.StoreDir, err)
	}
	token, secretFile, err := loadSecret(opts.StoreDir)
	if err != nil {
		unlock()
		return nil, err
	}
	opts.Authorization = token
	s, err := server.NewServer(opts)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("configure the NATS server: %w", err)
	}
	fatal := make(chan string, 1)
	s.SetLogger(&logger{log: cfg.Log, fatal: fatal}, false, false)
	go s.Start()
	within := cfg.ReadyWithin
	if within == 0 {
		within = 30 * time.Second
	}
	deadline := time.Now().Add(within)
	for !s.ReadyForConnections(100 * time.Millisecond) {
		select {
		case line := <-fatal:
			s.Shutdown()
			s.WaitForShutdown()
			unlock()
			return nil, fmt.Errorf("start the NATS server: %s", line)
		default:
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			s.WaitForShutdown()
			unlock()
			return nil, fmt.Errorf("start the NATS server: not ready within %v", within)
		}
	}
	return &Server{s: s, dir: opts.StoreDir, secret: secretFile, unlock: unlock}, nil
}

// SecretFile is the absolute path of the file that holds the secret
// every client must give (a client names it in INBOX_NATS_PASSWORD_FILE).
func (s *Server) SecretFile() string { return s.secret }

// URL is the server's client URL, nats://HOST:PORT, with the port it
// listens on (also when Config.Listen asked for any free one).
func (s *Server) URL() string { return s.s.ClientURL() }

// StoreDir is the absolute store directory (JetStream's files are in its
// jetstream subdirectory).
func (s *Server) StoreDir() string { return s.dir }

// SyncAlways reports whether the running JetStream syncs every write to
// disk before acknowledging it (sync_interval: always).
func (s *Server) SyncAlways() bool {
	c := s.s.JetStreamConfig()
	return c != nil && c.SyncAlways
}

// Stop shuts the server down, waits until it has, and releases the store
// directory.
func (s *Server) Stop() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
	s.unlock()
}

// logger hands the server's log lines to a Logger and reports its fatal
// errors (it cannot listen, JetStream cannot start) to Start.
type logger struct {
	log   Logger
	fatal chan string
}

func (l *logger) Noticef(format string, v ...any) {
	if l.log != nil {
		l.log.Notice(fmt.Sprintf(format, v...))
	}
}

func (l *logger) Warnf(format string, v ...any) {
	if l.log != nil {
		l.log.Warn(fmt.Sprintf(format, v...))
	}
}

func (l *logger) Errorf(format string, v ...any) {
	if l.log != nil {
		l.log.Error(fmt.Sprintf(format, v...))
	}
}

func (l *logger) Fatalf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	select {
	case l.fatal <- line:
	default:
	}
}

func (l *logger) Debugf(string, ...any) {}

func (l *logger) Tracef(string, ...any) {}
