package inbox_test

import (
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
)

func TestErrorRender(t *testing.T) {
	flag := func(f string) string { return "--" + strings.ReplaceAll(f, "_", "-") }
	for _, tc := range []struct {
		err        *inbox.Error
		plain, cli string
	}{
		{inbox.Invalid("lease_seconds", "%d is out of range", 0), "lease_seconds 0 is out of range", "--lease-seconds 0 is out of range"},
		{inbox.Invalid("after_message", "and {after_event} cannot both be given"),
			"after_message and after_event cannot both be given", "--after-message and --after-event cannot both be given"},
		{inbox.InvalidState("a {brace} that is no field: {Not} {} {x-y} {"), "a brace that is no field: {Not} {} {x-y} {", "a --brace that is no field: {Not} {} {x-y} {"},
		{inbox.NotFound("thread %s not found", "thr_1"), "thread thr_1 not found", "thread thr_1 not found"},
	} {
		if got := tc.err.Error(); got != tc.plain {
			t.Errorf("Error() = %q, want %q", got, tc.plain)
		}
		if got := tc.err.Render(flag); got != tc.cli {
			t.Errorf("Render = %q, want %q", got, tc.cli)
		}
	}
}
