package spool

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a Store method returns wraps exactly one of
// them (through *Error), so callers classify with errors.Is.
var (
	// ErrInvalidInput is returned when an argument breaks a rule: a bad
	// name, an unknown kind or status, malformed JSON, a value out of range.
	ErrInvalidInput = errors.New("invalid input")

	// ErrInvalidState is returned when an operation is not allowed in the
	// thread's current status, such as anything on a terminal thread or an
	// update on a thread nobody claimed.
	ErrInvalidState = errors.New("invalid state transition")

	// ErrLeaseConflict is returned when another agent holds the live lease.
	ErrLeaseConflict = errors.New("lease conflict")

	// ErrLeaseExpired is returned when the caller's lease has expired; the
	// holder must claim again before acting on the thread.
	ErrLeaseExpired = errors.New("lease expired")

	// ErrStaleToken is returned when a holder command carries a lease token
	// that is not the thread's current one.
	ErrStaleToken = errors.New("stale lease token")

	// ErrNotLeaseHolder is returned when the caller holds no lease on a
	// claimed thread (it never claimed it, or someone else's lease lapsed).
	ErrNotLeaseHolder = errors.New("not the lease holder")

	// ErrIdempotencyMismatch is returned when an idempotency key is reused
	// for a different command in the same scope.
	ErrIdempotencyMismatch = errors.New("idempotency key reused")

	// ErrNotFound is returned when a thread or message does not exist.
	ErrNotFound = errors.New("not found")

	// ErrNotInitialized is returned by Open when the directory holds no store.
	ErrNotInitialized = errors.New("store not initialized")

	// ErrFormat is returned when the store was written by a newer or unknown
	// format version, or a file in it cannot be parsed.
	ErrFormat = errors.New("unsupported store format")

	// ErrStorage is returned when the file system fails us: a failed write,
	// fsync, rename or lock (a full disk, a read-only store). A failure
	// before the operation's commit point leaves nothing changed; one after
	// it (say, the event append of a change already committed) leaves the
	// change in place, its event added by the next writer or fsck --repair.
	// Retry with an idempotency key to be safe either way.
	ErrStorage = errors.New("storage error")
)

// Error carries a machine-readable code, the flag or field at fault (when
// there is one) and a human message; it unwraps to one of the sentinels.
type Error struct {
	Code    string // stable snake_case code for the JSON error shape
	Field   string // the flag or field at fault, without dashes; may be empty
	Message string // lower-case, no final period
	Err     error  // one of the sentinel errors above
	Cause   error  // the underlying error, if any
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the sentinel and the cause, so errors.Is works for both.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

func newErr(sentinel error, code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...), Err: sentinel}
}

// invalidf reports bad input for a named flag or field.
func invalidf(field, format string, args ...any) *Error {
	return newErr(ErrInvalidInput, "invalid_input", field, format, args...)
}

func stateErr(format string, args ...any) *Error {
	return newErr(ErrInvalidState, "invalid_state", "", format, args...)
}

func notFound(format string, args ...any) *Error {
	return newErr(ErrNotFound, "not_found", "", format, args...)
}

// storageErr wraps a file-system failure; op says what we were doing.
func storageErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: "storage_error", Message: fmt.Sprintf(format, args...) + ": " + err.Error(),
		Err: ErrStorage, Cause: err}
}
