package inbox

import (
	"strings"
	"unicode/utf8"
)

// FirstLine is the first line of s that is not blank, trimmed.
func FirstLine(s string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

// Shorten cuts s to at most max bytes on a rune boundary, ending it with
// "…" when it cuts. Summaries, subjects and event lines are bounded in
// bytes, so this is the one rule for making text fit.
func Shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	ellipsis := "…"
	if max < len(ellipsis) {
		ellipsis = ""
	}
	n := max - len(ellipsis)
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + ellipsis
}

// Text shown to people (SPEC §4) never passes a control character to their
// terminal: whoever wrote a subject, summary or body could otherwise
// recolour, retitle or rewrite the reader's screen. Printable and
// PrintableText escape, in Go's notation, every C0 control and DEL
// (\x1b; newline, tab and CR as \n, \t, \r), every byte that is not
// UTF-8 (\x9b), every C1 control (U+0080–U+009F, as \u009b) and every
// bidi embedding, override or isolate (U+202A–U+202E, U+2066–U+2069, as
// \u202e), which can make text read other than it is. Everything else,
// a backslash included, is shown as it is. What they return is printable
// already: escaping it again changes nothing.

// Printable is s escaped for a one-line field (a subject, a summary, a
// table cell): newlines and tabs are escaped too, so that no field can
// fake a line or a column.
func Printable(s string) string { return printable(s, false) }

// PrintableText is s escaped for multi-line text (a body): it keeps
// newlines and tabs.
func PrintableText(s string) string { return printable(s, true) }

func printable(s string, text bool) string {
	i := firstEscape(s, text)
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	return string(appendPrintable(append(b, s[:i]...), s[i:], text))
}

// AppendPrintable appends p to b escaped as Printable (text false) or
// PrintableText (text true) escape it.
func AppendPrintable(b, p []byte, text bool) []byte { return appendPrintable(b, p, text) }

// firstEscape is the index of the first byte of s that is escaped, or -1.
func firstEscape[T string | []byte](s T, text bool) int {
	class := &lineClass
	if text {
		class = &textClass
	}
	for i := 0; i < len(s); i++ {
		switch class[s[i]] {
		case passes:
			continue
		case escaped:
			return i
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 || escapedRune(r) {
			return i
		}
		i += size - 1
	}
	return -1
}

// What a byte is to firstEscape: printable ASCII passes, a control
// character is escaped, the first byte of a multi-byte character (or a
// byte that is not UTF-8) needs a look at the character.
const (
	passes = iota
	escaped
	decode
)

var lineClass, textClass = byteClasses(false), byteClasses(true)

func byteClasses(text bool) (c [256]byte) {
	for b := range 256 {
		switch {
		case b >= 0x80:
			c[b] = decode
		case b < 0x20 && !(text && (b == '\n' || b == '\t')) || b == 0x7f:
			c[b] = escaped
		}
	}
	return c
}

func appendPrintable[T string | []byte](b []byte, s T, text bool) []byte {
	for {
		i := firstEscape(s, text)
		if i < 0 {
			return append(b, s...)
		}
		b = append(b, s[:i]...)
		c := s[i]
		if c < 0x80 {
			switch c {
			case '\n':
				b = append(b, `\n`...)
			case '\t':
				b = append(b, `\t`...)
			case '\r':
				b = append(b, `\r`...)
			default:
				b = append(b, '\\', 'x', hexDigit[c>>4], hexDigit[c&15])
			}
			s = s[i+1:]
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			b = append(b, '\\', 'x', hexDigit[c>>4], hexDigit[c&15])
		} else {
			b = append(b, '\\', 'u', hexDigit[r>>12&15], hexDigit[r>>8&15], hexDigit[r>>4&15], hexDigit[r&15])
		}
		s = s[i+size:]
	}
}

const hexDigit = "0123456789abcdef"

// escapedRune reports whether r, a valid rune beyond ASCII, is escaped:
// a C1 control or a bidi embedding, override or isolate.
func escapedRune(r rune) bool {
	return r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}
