package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
func errorShape(err error) map[string]string { return errorShapeIn(err, "") }

// errorShapeIn is errorShape in the terms of command cmd (messageIn).
func errorShapeIn(err error, cmd string) map[string]string {
	shape := map[string]string{"code": "internal_error", "message": messageIn(err, cmd)}
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
func message(err error) string { return messageIn(err, "") }

// messageIn is err in the terms of command cmd: a field that is one of
// its positional arguments is named as its usage line names it (push's
// prompt is PROMPT), every other field as its --flag.
func messageIn(err error, cmd string) string {
	var se *inbox.Error
	if errors.As(err, &se) {
		return se.Render(func(f string) string {
			if arg := positionalArg(cmd, f); arg != "" {
				return arg
			}
			return "--" + flagName(f)
		})
	}
	return err.Error()
}

// positionalArg is the positional argument of command cmd that gives
// field f ("PROMPT" for push's "prompt"), or "" when f is a flag of cmd,
// a global flag, or no argument of it.
func positionalArg(cmd, f string) string {
	c := lookup(cmd)
	if c == nil || c.args == "" {
		return ""
	}
	arg := strings.ToUpper(f)
	words := strings.FieldsFunc(c.args, func(r rune) bool { return (r < 'A' || r > 'Z') && r != '_' })
	if !slices.Contains(words, arg) || slices.Contains(globalFlags, flagName(f)) || CommandFlags(cmd).Lookup(flagName(f)) != nil {
		return ""
	}
	return arg
}

// globalFlags are the flags every command takes.
var globalFlags = []string{"db", "json", "agent", "lock-timeout", "help"}

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
