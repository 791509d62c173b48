package cli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/inbox-dev/inbox"
)

// TestExitCodes: the one mapping from errors to SPEC §4's exit codes, and
// the codes and fields of the JSON error shape.
func TestExitCodes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("claim thr_1: %w", err) }
	for _, tc := range []struct {
		err   error
		exit  int
		code  string
		field string
	}{
		{nil, 0, "", ""},
		{usagef("limit", "--limit must be a whole number"), 30, "invalid_input", "limit"},
		{inbox.Invalid("lease_seconds", "0 is out of range"), 30, "invalid_input", "lease-seconds"},
		{wrap(inbox.InvalidState("thread thr_1 is done")), 30, "invalid_state", ""},
		{inbox.Errorf(inbox.ErrIdempotencyMismatch, "idempotency_key_reused", "idempotency_key", "reused"), 30, "idempotency_key_reused", "idempotency-key"},
		{inbox.Errorf(inbox.ErrLeaseConflict, "lease_conflict", "", "claimed by b"), 20, "lease_conflict", ""},
		{inbox.Errorf(inbox.ErrLeaseExpired, "lease_expired", "", "expired"), 20, "lease_expired", ""},
		{inbox.Errorf(inbox.ErrStaleToken, "stale_lease_token", "lease_token", "3 is stale"), 20, "stale_lease_token", "lease-token"},
		{inbox.Errorf(inbox.ErrNotLeaseHolder, "not_lease_holder", "", "not yours"), 20, "not_lease_holder", ""},
		{wrap(inbox.NotFound("thread thr_1 not found")), 40, "not_found", ""},
		{inbox.Errorf(inbox.ErrNotInitialized, "store_not_initialized", "", "no store"), 50, "store_not_initialized", ""},
		{inbox.Corrupt(nil, "damaged"), 50, "corrupt_store", ""},
		{inbox.Storage(errors.New("no space left on device"), "write"), 50, "storage_error", ""},
		{inbox.Internal(errors.New("a bug")), 50, "internal_error", ""},
		{errors.New("plain"), 50, "internal_error", ""},
	} {
		if got := exitCode(tc.err); got != tc.exit {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.exit)
		}
		if tc.err == nil {
			continue
		}
		shape := errorShape(tc.err)
		if shape["code"] != tc.code || shape["field"] != tc.field {
			t.Errorf("errorShape(%v) = %v, want code %q field %q", tc.err, shape, tc.code, tc.field)
		}
	}
}

// TestMessagesNameFlags: the CLI renders the fields an error names, in
// its field and in its rule, as --flags.
func TestMessagesNameFlags(t *testing.T) {
	err := inbox.Invalid("after_message", "and {after_event} cannot both be given")
	if got, want := message(err), "--after-message and --after-event cannot both be given"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if got, want := err.Error(), "after_message and after_event cannot both be given"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
