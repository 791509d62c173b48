package inbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"1", 1}, {"1073741824", 1 << 30}, {"512MiB", 512 << 20}, {"512mib", 512 << 20}, {"1G", 1 << 30},
		{"1g", 1 << 30}, {"1GiB", 1 << 30}, {"64 KB", 64000}, {"64K", 64 << 10}, {"2TB", 2e12}, {"3T", 3 << 40},
		{" 7 b ", 7}, {"9223372036854775807", 1<<63 - 1}, {"8388607T", 8388607 << 40},
	} {
		got, err := inbox.ParseSize("max_blob", tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "0", "0GiB", "-1", "1.5G", "G", "12XB", "1 2", "9223372036854775808", "8388608T", "1e9"} {
		_, err := inbox.ParseSize("max_blob", in)
		var se *inbox.Error
		if !errors.As(err, &se) || se.Field != "max_blob" || !errors.Is(err, inbox.ErrInvalidInput) {
			t.Errorf("ParseSize(%q) = %v, want invalid max_blob", in, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1: "1 byte", 1000: "1000 bytes", 1024: "1 KiB", 1 << 30: "1 GiB", 3 << 40: "3 TiB",
		60000000: "57.2 MiB", 1536: "1.5 KiB",
	} {
		if got := inbox.FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestTooLarge(t *testing.T) {
	err := inbox.TooLarge("body", 60000000, 1<<20, "this store's maximum (max_blob)", "raise it")
	if got := err.Error(); !strings.HasPrefix(got, "body is 57.2 MiB (60000000 bytes), over this store's maximum (max_blob) of 1 MiB (1048576 bytes): ") ||
		!strings.Contains(got, "{artifact}") && !strings.Contains(got, "artifact") || !strings.HasSuffix(got, "or raise it") {
		t.Errorf("got %q", got)
	}
	if got := inbox.TooLarge("body", 1048577, 1<<20, "m", "r").Error(); !strings.HasPrefix(got, "body is 1048577 bytes, over m of 1 MiB") {
		t.Errorf("got %q", got)
	}
	if got := inbox.TooLarge("body", -1, 1<<20, "m", "r").Error(); !strings.HasPrefix(got, "body is larger than m of 1 MiB") {
		t.Errorf("got %q", got)
	}
}
