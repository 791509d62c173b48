// Package jsontext checks the text of JSON values that the store keeps
// verbatim (payloads, descriptor fields) for what encoding/json lets
// through but strict readers refuse: bytes that are not UTF-8, and \u
// escapes of lone UTF-16 surrogates such as "\ud800". encoding/json
// replaces both with U+FFFD when it decodes, so a value that holds them
// would not read back as it was written, and other JSON readers (jq,
// Python's json with strict settings, browsers) may refuse the file.
//
// The store and the intake daemon apply the same rule through this
// package: such text is refused with the offset of the first bad byte.
package jsontext

import (
	"fmt"
	"unicode/utf8"
)

// Error says where a JSON text breaks the rule and how.
type Error struct {
	Offset int    // byte offset of the first bad byte or escape
	Reason string // e.g. `\ud800 is a lone UTF-16 surrogate`
}

func (e *Error) Error() string { return fmt.Sprintf("%s at byte %d", e.Reason, e.Offset) }

// Check reports the first place where data, a syntactically valid JSON
// text, is not valid UTF-8 or holds a \u escape of a lone surrogate.
func Check(data []byte) error {
	if !utf8.Valid(data) {
		for i := 0; i < len(data); {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				return &Error{Offset: i, Reason: "not valid UTF-8"}
			}
			i += n
		}
	}
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(data) {
				return nil // not valid JSON; the caller's parser says so
			}
			if data[i+1] != 'u' {
				i++ // a one-character escape
				continue
			}
			r, ok := hex4(data, i+2)
			if !ok {
				return nil
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				// A high surrogate must be followed by an escaped low one.
				if i+11 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
					if lo, ok := hex4(data, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
						i += 11
						continue
					}
				}
				return &Error{Offset: i, Reason: fmt.Sprintf(`\u%04x is a lone UTF-16 surrogate (not a character)`, r)}
			case r >= 0xDC00 && r <= 0xDFFF:
				return &Error{Offset: i, Reason: fmt.Sprintf(`\u%04x is a lone UTF-16 surrogate (not a character)`, r)}
			}
			i += 5
		}
	}
	return nil
}

// hex4 reads four hex digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}
