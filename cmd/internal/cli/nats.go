package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/inbox-dev/inbox"
)

// NATS stores (docs/JETSTREAM.md). The inbox binary does not link the
// NATS client, whose package initialisation every process would pay: given
// a nats:// (or tls://) store it hands the whole command line to the
// inbox-nats binary, which is this CLI with OpenNATS set.

// OpenNATS opens (create: or creates) the NATS store db names, when this
// binary links the NATS backend; source is what its events record.
var OpenNATS func(ctx context.Context, db string, create bool, source string) (bus inbox.Bus, created bool, err error)

// natsBinary is the companion binary that serves NATS stores.
const natsBinary = "inbox-nats"

// isNATS reports whether db names a NATS store rather than a directory.
func isNATS(db string) bool {
	return strings.HasPrefix(db, "nats://") || strings.HasPrefix(db, "tls://")
}

// storeless are the commands that never open a store.
var storeless = map[string]bool{"completion": true, "skill": true}

// handOver replaces this process with inbox-nats (beside this binary,
// else on PATH) given the same arguments, so that stdin, stdout, stderr,
// signals and the exit code are the companion's own.
func handOver(c *call) error {
	bin := companion(natsBinary)
	if bin == "" {
		return inbox.Errorf(inbox.ErrNotFound, "nats_not_installed", "db",
			"a nats:// store is served by the %s binary, found neither beside this one nor on PATH: build both with go build -o bin/ ./cmd/... (or go install ./cmd/...)", natsBinary)
	}
	args, environ, _ := moveSecrets(c.raw, os.Environ())
	err := syscall.Exec(bin, append([]string{natsBinary}, args...), environ)
	return inbox.Internal(fmt.Errorf("run %s: %w", bin, err))
}

// Secrets (SPEC §8): a NATS store URL's password or token never stays in
// a process's argv. The hand-over to inbox-nats, and inbox-nats given one
// directly, move it into the environment (inbox.EnvNATSPassword), where
// natsbus finds it, and leave the URL without it (nats://USER@HOST/NAME,
// or nats://HOST/NAME for a token; inbox.SplitNATSURL): what the command
// shows, what a runner's argv and a task's INBOX_DB hold, and what hook
// install writes never carry it.

// urlFlags are the flags whose value may be a NATS store URL.
var urlFlags = []string{"--db", "--from", "--to"}

// moveSecrets returns args and environ with the secrets of the NATS store
// URLs in them moved out: INBOX_DB and every --db, --from or --to value
// (before a "--") that holds a password or a token is replaced by the URL
// without it, and the secret goes to inbox.EnvNATSPassword (one store per
// command: the last one found wins). argvChanged reports whether args did.
func moveSecrets(args, environ []string) (outArgs, outEnv []string, argvChanged bool) {
	getenv := func(k string) string {
		for i := len(environ) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(environ[i], k+"="); ok {
				return v
			}
		}
		return ""
	}
	secret, err := inbox.NATSSecret(getenv)
	if err != nil {
		// natsbus reports the bad file. Meanwhile a user without a
		// password in a URL is not to be taken for a token and moved to
		// INBOX_NATS_PASSWORD, which would hide that file: split as if
		// the environment had a password, so only a URL's own goes.
		secret = "unread"
	}
	moved := ""
	hide := func(db string) string {
		if !isNATS(db) {
			return db
		}
		public, cred := inbox.SplitNATSURL(db, secret)
		if public != db {
			moved = cred.Secret()
		}
		return public
	}
	outEnv = environ
	if db := getenv("INBOX_DB"); db != "" {
		if public := hide(db); public != db {
			outEnv = setEnv(outEnv, "INBOX_DB", public)
		}
	}
	outArgs = append([]string(nil), args...)
	for i := 0; i < len(outArgs); i++ {
		a := outArgs[i]
		if a == "--" {
			break
		}
		for _, f := range urlFlags {
			if a == f && i+1 < len(outArgs) {
				i++
				if public := hide(outArgs[i]); public != outArgs[i] {
					outArgs[i], argvChanged = public, true
				}
				break
			}
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				if public := hide(v); public != v {
					outArgs[i], argvChanged = f+"="+public, true
				}
				break
			}
		}
	}
	if moved != "" {
		outEnv = setEnv(outEnv, inbox.EnvNATSPassword, moved)
	}
	return outArgs, outEnv, argvChanged
}

// setEnv returns environ with k set to v (and no other k).
func setEnv(environ []string, k, v string) []string {
	out := inbox.WithoutEnv(environ, k)
	return append(out, k+"="+v)
}

// HideSecrets takes the secrets of NATS store URLs out of this process's
// arguments and INBOX_DB, for a binary that serves NATS stores itself
// (inbox-nats run directly): the secret goes to the environment and, when
// the arguments held one, the binary runs again with arguments that hold
// none (execve: the same process), so that its argv never shows it.
func HideSecrets() {
	args, environ, argvChanged := moveSecrets(os.Args[1:], os.Environ())
	if argvChanged {
		if self, err := os.Executable(); err == nil {
			syscall.Exec(self, append([]string{os.Args[0]}, args...), environ)
		}
		// Not run again: at least nothing this process shows holds it.
		os.Args = append(os.Args[:1], args...)
	}
	for _, k := range []string{"INBOX_DB", inbox.EnvNATSPassword} {
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				os.Setenv(k, v)
			}
		}
	}
}
