package spool

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The store's own records (threads, headers, messages, leases, events,
// cursors) are encoded and decoded by hand-written code rather than by
// encoding/json's reflection: the primitives of writing in this file, of
// reading in jsondec.go, and each record's members in records.go. Every command is
// a process of its own, and the first use of reflection-based encoding
// or decoding in a process costs several hundred microseconds of cold
// code and type walking, more than the rest of a fetch. The output is
// byte for byte what encoding/json produces with HTML escaping off (the
// format of every file written before), and decoding yields what
// json.Unmarshal yields; jsoncodec_test.go fuzzes both claims.

// AppendJSONString appends s as a JSON string, as encoding/json writes it
// with HTML escaping off.
func AppendJSONString(b []byte, s string) []byte { return appendString(b, s) }

// appendString appends s as a JSON string, escaped as encoding/json does
// with SetEscapeHTML(false): quote, backslash and control characters are
// escaped, U+2028 and U+2029 too, invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
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

// appendRaw appends a json.RawMessage as encoding/json does: null when it
// is empty, else compacted. Raw values in the store come from validJSON or
// from decoding, so they are valid and already compact; a value that is
// neither is appended as it is.
func appendRaw(b []byte, raw json.RawMessage) []byte {
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
	return appendString(appendKey(b, key), v)
}

func appendIntField(b []byte, key string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, key), v, 10)
}

// jsonFields builds a small event payload: keys are written in sorted
// order, as encoding/json renders a map. Values are strings or integers.
type jsonFields []jsonField

type jsonField struct {
	key, str string
	num      int64
	isNum    bool
}

func (p jsonFields) str(k, v string) jsonFields { return append(p, jsonField{key: k, str: v}) }

func (p jsonFields) num(k string, v int64) jsonFields {
	return append(p, jsonField{key: k, num: v, isNum: true})
}

func (p jsonFields) raw() json.RawMessage {
	slices.SortFunc(p, func(a, b jsonField) int { return strings.Compare(a.key, b.key) })
	b := []byte{'{'}
	for _, m := range p {
		if m.isNum {
			b = appendIntField(b, m.key, m.num)
		} else {
			b = appendStrField(b, m.key, m.str)
		}
	}
	return append(b, '}')
}
