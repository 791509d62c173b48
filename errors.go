package inbox

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error an operation returns wraps exactly one of
// them (through *Error), so callers classify with errors.Is.
var (
	// ErrInvalidInput is returned when an argument breaks a rule: a bad
	// name, an unknown kind or status, malformed JSON, a value out of range.
	ErrInvalidInput = errors.New("invalid input")

	// ErrInvalidState is returned when an operation is not allowed in the
	// thread's current status, such as anything on a terminal thread or an
	// update on a thread nobody claimed.
	ErrInvalidState = errors.New("invalid state transition")

	// ErrLeaseConflict is returned when another agent holds the live lease
	// (or another process holds a lock the operation needs, such as the
	// daemon's).
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

	// ErrConflict is returned when what a call would create exists
	// already (a team of that name).
	ErrConflict = errors.New("conflict")

	// ErrNotFound is returned when a thread, message, task or team does
	// not exist.
	ErrNotFound = errors.New("not found")

	// ErrNotInitialized is returned when the location holds no store.
	ErrNotInitialized = errors.New("store not initialized")

	// ErrFormat is returned when the store was written by a newer or
	// unknown format version, or a file or record in it is damaged.
	ErrFormat = errors.New("unsupported store format")

	// ErrStorage is returned when the storage fails us: a failed write,
	// fsync, rename or lock (a full disk, a read-only store), or a server
	// that cannot be reached. A failure before the operation's commit point
	// leaves nothing changed; one after it leaves the change in place.
	// Retry with an idempotency key to be safe either way.
	ErrStorage = errors.New("storage error")

	// ErrInternal is returned for what is none of the above: a bug, or a
	// failure the backend cannot classify. It is not a disk failure.
	ErrInternal = errors.New("internal error")
)

// Error is what an operation returns when it fails: a stable code for
// machines, the field at fault (when there is one) and the rule it broke,
// in words. It unwraps to one of the sentinels above and to its cause.
//
// Field is a field name in snake_case, as the records and descriptors
// spell it ("lease_seconds", "payload_json"). Rule follows the field's
// name in a sentence ("0 is out of range: give 1 to 604800") and may name
// other fields as {field}. Front-ends render the names in their own terms
// (the CLI as --flags, the daemon as descriptor fields) with Render.
type Error struct {
	Code  string // stable snake_case code, e.g. "invalid_input", "lease_conflict"
	Field string // the field at fault; empty when the error is not about one
	Rule  string // the rule broken, or what went wrong; see above
	Err   error  // one of the sentinel errors
	Cause error  // the underlying error, if any
}

func (e *Error) Error() string { return e.Render(func(f string) string { return f }) }

// Render writes the error as a sentence, each field named by name: the
// field at fault first, then the rule, whose {field} references become
// name(field).
func (e *Error) Render(name func(field string) string) string {
	rule := expandFields(e.Rule, name)
	if e.Field == "" {
		return rule
	}
	return name(e.Field) + " " + rule
}

// expandFields replaces each {field} in rule (a lower-case name of
// letters, digits and underscores) with name(field).
func expandFields(rule string, name func(string) string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(rule, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rule[i:], '}')
		if j < 0 || !isFieldName(rule[i+1:i+j]) {
			b.WriteString(rule[:i+1])
			rule = rule[i+1:]
			continue
		}
		b.WriteString(rule[:i])
		b.WriteString(name(rule[i+1 : i+j]))
		rule = rule[i+j+1:]
	}
	b.WriteString(rule)
	return b.String()
}

func isFieldName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Unwrap returns the sentinel and the cause, so errors.Is works for both.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// Errorf builds an error wrapping sentinel, with its code and field.
func Errorf(sentinel error, code, field, rule string, args ...any) *Error {
	return &Error{Code: code, Field: field, Rule: fmt.Sprintf(rule, args...), Err: sentinel}
}

// Invalid reports that field breaks rule (ErrInvalidInput).
func Invalid(field, rule string, args ...any) *Error {
	return &Error{Code: "invalid_input", Field: field, Rule: fmt.Sprintf(rule, args...), Err: ErrInvalidInput}
}

// InvalidState reports a transition the thread's status does not allow
// (ErrInvalidState).
func InvalidState(format string, args ...any) *Error {
	return &Error{Code: "invalid_state", Rule: fmt.Sprintf(format, args...), Err: ErrInvalidState}
}

// NotFound reports something that does not exist (ErrNotFound).
func NotFound(format string, args ...any) *Error {
	return &Error{Code: "not_found", Rule: fmt.Sprintf(format, args...), Err: ErrNotFound}
}

// Storage wraps a failure of the storage (ErrStorage); what says what was
// being done. An *Error passes through unchanged; nil stays nil.
func Storage(err error, what string, args ...any) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: "storage_error", Rule: fmt.Sprintf(what, args...) + ": " + err.Error(), Err: ErrStorage, Cause: err}
}

// Corrupt reports damage in the store (ErrFormat, code corrupt_store).
func Corrupt(err error, format string, args ...any) *Error {
	return &Error{Code: "corrupt_store", Rule: fmt.Sprintf(format, args...), Err: ErrFormat, Cause: err}
}

// Internal wraps an error that is none of the sentinels' (ErrInternal).
// An *Error passes through unchanged; nil stays nil.
func Internal(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: "internal_error", Rule: err.Error(), Err: ErrInternal, Cause: err}
}
