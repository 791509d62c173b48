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

func TestPrintable(t *testing.T) {
	for _, tc := range []struct {
		in, line, text string
	}{
		{"plain text, ünïcode 日本", "plain text, ünïcode 日本", "plain text, ünïcode 日本"},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`, `\x1b[31mred\x1b[0m`},
		{"\x1b]0;title\a", `\x1b]0;title\x07`, `\x1b]0;title\x07`},
		{"a\rb", `a\rb`, `a\rb`},
		{"a\nb\tc", `a\nb\tc`, "a\nb\tc"},
		{"nul\x00 del\x7f vt\v ff\f", `nul\x00 del\x7f vt\x0b ff\x0c`, `nul\x00 del\x7f vt\x0b ff\x0c`},
		{"csi\u009b2J nel\u0085 pad\u0080", `csi\u009b2J nel\u0085 pad\u0080`, `csi\u009b2J nel\u0085 pad\u0080`},
		{"raw \x9b byte \xff\xfe", `raw \x9b byte \xff\xfe`, `raw \x9b byte \xff\xfe`},
		{"cut \xe6\x97", `cut \xe6\x97`, `cut \xe6\x97`},
		{"\u202ecod.exe \u202a\u202b\u202c\u202d \u2066\u2067\u2068\u2069", `\u202ecod.exe \u202a\u202b\u202c\u202d \u2066\u2067\u2068\u2069`, `\u202ecod.exe \u202a\u202b\u202c\u202d \u2066\u2067\u2068\u2069`},
		{"not bidi: \u200e\u2028\u00a0", "not bidi: \u200e\u2028\u00a0", "not bidi: \u200e\u2028\u00a0"},
		{`a backslash \x1b stays`, `a backslash \x1b stays`, `a backslash \x1b stays`},
	} {
		if got := inbox.Printable(tc.in); got != tc.line {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if got := inbox.PrintableText(tc.in); got != tc.text {
			t.Errorf("PrintableText(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if got := string(inbox.AppendPrintable([]byte("x"), []byte(tc.in), true)); got != "x"+tc.text {
			t.Errorf("AppendPrintable(%q) = %q, want %q", tc.in, got, "x"+tc.text)
		}
		// Escaping is idempotent: what it gives is printable already.
		if got := inbox.Printable(tc.line); got != tc.line {
			t.Errorf("Printable(Printable(%q)) = %q, want %q", tc.in, got, tc.line)
		}
	}
}

// TestPrintableLeavesNothingActive tries every byte and every rune up to
// U+FFFF: what Printable gives holds no C0 or C1 control, DEL, bidi
// override or invalid UTF-8, and PrintableText only newline and tab more.
func TestPrintableLeavesNothingActive(t *testing.T) {
	active := func(s string, text bool) bool {
		if !utf8.ValidString(s) {
			return true
		}
		for _, r := range s {
			if text && (r == '\n' || r == '\t') {
				continue
			}
			if r < 0x20 || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
				return true
			}
		}
		return false
	}
	var in []string
	for b := 0; b < 256; b++ {
		in = append(in, "a"+string([]byte{byte(b)})+"z")
	}
	for r := rune(0); r < 0x10000; r++ {
		in = append(in, "a"+string(r)+"z")
	}
	for _, s := range in {
		if got := inbox.Printable(s); active(got, false) {
			t.Errorf("Printable(%q) = %q: still active", s, got)
		}
		if got := inbox.PrintableText(s); active(got, true) {
			t.Errorf("PrintableText(%q) = %q: still active", s, got)
		}
	}
}
