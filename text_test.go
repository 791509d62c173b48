package inbox_test

import (
	"testing"
	"unicode/utf8"

	"github.com/inbox-dev/inbox"
)

func TestShorten(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer sentence", 10, "a longe…"},
		{"日本語のテキスト", 10, "日本…"},
		{"abc", 2, "ab"},
		{"日本", 2, ""},
	} {
		got := inbox.Shorten(tc.in, tc.max)
		if got != tc.want || len(got) > tc.max || !utf8.ValidString(got) {
			t.Errorf("Shorten(%q, %d) = %q, want %q (at most %d bytes, valid UTF-8)", tc.in, tc.max, got, tc.want, tc.max)
		}
	}
	if got := inbox.FirstLine("\n  \n  first line  \nsecond"); got != "first line" {
		t.Errorf("FirstLine = %q", got)
	}
}
