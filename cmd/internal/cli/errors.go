package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/inbox-dev/inbox"
)

// Exit codes (SPEC §4). exitCode is the one place errors map to them.
const (
	exitOK       = 0
	exitNoWork   = 10
	exitConflict = 20
	exitInvalid  = 30
	exitNotFound = 40
	exitStorage  = 50
)

// interruptExit is the exit code of a blocking command that a signal
// ended (SPEC §7 Interrupts): 128 plus the signal's number, as a shell
// reports it, so 130 for SIGINT and 143 for SIGTERM.
func interruptExit(sig syscall.Signal) int { return 128 + int(sig) }

// interruptedError is a command's error once a signal cancelled its
// context (interruption.wrap): it names the signal for exitCode.
type interruptedError struct {
	sig syscall.Signal
	err error
}

func (e *interruptedError) Error() string {
	return fmt.Sprintf("interrupted (%s): %v", signalName(e.sig), e.err)
}

func (e *interruptedError) Unwrap() error { return e.err }

// wrap names the signal that cancelled the invocation in err, when err is
// the cancellation.
func (in *interruption) wrap(err error) error {
	if sig := in.signal(); sig != 0 && errors.Is(err, context.Canceled) {
		return &interruptedError{sig: sig, err: err}
	}
	return err
}

// usageError is bad command-line usage: exit 30.
type usageError struct {
	field string
	msg   string
}

func (e *usageError) Error() string { return e.msg }

func usagef(field, format string, args ...any) error {
	return &usageError{field: field, msg: fmt.Sprintf(format, args...)}
}

// exitCode maps an error to its exit code.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled):
		// A signal, or the end of an MCP request, cancelled the command
		// (SPEC §7 Interrupts): 130 unless the signal was SIGTERM.
		var ie *interruptedError
		if errors.As(err, &ie) {
			return interruptExit(ie.sig)
		}
		return interruptExit(syscall.SIGINT)
	case errors.As(err, &ue), errors.Is(err, inbox.ErrInvalidInput), errors.Is(err, inbox.ErrInvalidState),
		errors.Is(err, inbox.ErrIdempotencyMismatch):
		return exitInvalid
	case errors.Is(err, inbox.ErrLeaseConflict), errors.Is(err, inbox.ErrLeaseExpired), errors.Is(err, inbox.ErrConflict),
		errors.Is(err, inbox.ErrStaleToken), errors.Is(err, inbox.ErrNotLeaseHolder):
		return exitConflict
	case errors.Is(err, inbox.ErrNotFound):
		return exitNotFound
	}
	return exitStorage
}

// errorShape is the "error" member of a failed JSON response.
func errorShape(err error) map[string]string {
	shape := map[string]string{"code": "internal_error", "message": message(err)}
	if h := hintFor(err); h != "" {
		shape["hint"] = h
	}
	var se *inbox.Error
	var ue *usageError
	switch {
	case errors.Is(err, context.Canceled):
		shape["code"] = "interrupted"
	case errors.As(err, &se):
		shape["code"] = se.Code
		if se.Field != "" {
			shape["field"] = flagName(se.Field)
		}
	case errors.As(err, &ue):
		shape["code"] = "invalid_input"
		if ue.field != "" {
			shape["field"] = ue.field
		}
	}
	return shape
}

// flagName is the flag (without dashes) that sets a field of the
// operations: the field's name with dashes for underscores.
func flagName(field string) string { return strings.ReplaceAll(field, "_", "-") }

// message is err in the CLI's terms: the fields an *inbox.Error names
// rendered as --flags.
func message(err error) string {
	var se *inbox.Error
	if errors.As(err, &se) {
		return se.Render(func(f string) string { return "--" + flagName(f) })
	}
	return err.Error()
}

// hintFor is a line of advice for a failed command, if there is one.
func hintFor(err error) string {
	switch {
	case errors.Is(err, inbox.ErrNotInitialized):
		return "inbox uses --db, else $INBOX_DB, else " + defaultDB
	case errors.Is(err, inbox.ErrLeaseExpired), errors.Is(err, inbox.ErrNotLeaseHolder):
		return "inbox claim --agent NAME --thread ID takes the lease again if nobody else holds it"
	case errors.Is(err, inbox.ErrStaleToken):
		return "a newer claim superseded your lease; stop work on this thread or claim it again"
	}
	var se *inbox.Error
	if errors.As(err, &se) {
		switch se.Code {
		case "corrupt_store":
			return "inbox fsck lists the damage and inbox fsck --repair repairs it"
		case "index_missing":
			return "inbox reindex rebuilds the index (so does inbox fsck --repair)"
		}
	}
	return ""
}
