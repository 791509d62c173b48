package jsonrec

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// AppendString appends s as a JSON string, escaped as encoding/json does
// with SetEscapeHTML(false): quote, backslash and control characters are
// escaped, U+2028 and U+2029 too, invalid UTF-8 becomes U+FFFD.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendRaw appends a json.RawMessage as encoding/json does: null when it
// is empty, else compacted. Raw values in the store come from validJSON or
// from decoding, so they are valid and already compact; a value that is
// neither is appended as it is.
func AppendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	if bytes.ContainsAny(raw, " \t\r\n") {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			return append(b, buf.Bytes()...)
		}
	}
	return append(b, raw...)
}

// appendKey appends ,"key": (or "key": first in an object). Keys are
// the fixed member names of the format, which need no escaping.
func appendKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendStrField(b []byte, key, v string) []byte {
	return AppendString(appendKey(b, key), v)
}

func appendIntField(b []byte, key string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, key), v, 10)
}

// Fields builds a small JSON object, such as an event's payload: keys are
// written in sorted order, as encoding/json renders a map. Values are
// strings or integers.
type Fields []field

type field struct {
	key, str string
	num      int64
	isNum    bool
	strs     []string
	isStrs   bool
}

// Str adds a string member.
func (p Fields) Str(k, v string) Fields { return append(p, field{key: k, str: v}) }

// Num adds an integer member.
func (p Fields) Num(k string, v int64) Fields {
	return append(p, field{key: k, num: v, isNum: true})
}

// Strs adds an array of strings (empty for none).
func (p Fields) Strs(k string, v []string) Fields {
	return append(p, field{key: k, strs: v, isStrs: true})
}

// JSON renders the object.
func (p Fields) JSON() json.RawMessage {
	slices.SortFunc(p, func(a, b field) int { return strings.Compare(a.key, b.key) })
	b := []byte{'{'}
	for _, m := range p {
		switch {
		case m.isNum:
			b = appendIntField(b, m.key, m.num)
		case m.isStrs:
			b = appendKey(b, m.key)
			b = append(b, '[')
			for i, s := range m.strs {
				if i > 0 {
					b = append(b, ',')
				}
				b = AppendString(b, s)
			}
			b = append(b, ']')
		default:
			b = appendStrField(b, m.key, m.str)
		}
	}
	return append(b, '}')
}
