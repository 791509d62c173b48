package inbox

import "strings"

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
