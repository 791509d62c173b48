package jsonrec

import (
	"encoding/json"
	"strconv"
)

// The code internal/recordgen generates for a record type is a list of
// its members, once for writing and once for reading; what a member of
// each kind takes is written here, once for every record.
//
// A record's members are written by a function that appends each one
// after a comma (AppendObject turns the first comma into the opening
// brace), so that a record embedding another writes the embedded one's
// members with the same function, and whether a member is the first one
// written is never asked. The key a member appender takes is the member's
// name as it is written: a comma, the quoted name and a colon
// (`,"thread_id":`). The OmitEmpty variants leave the member out when its
// value is empty, as encoding/json's omitempty does.

// AppendObject appends v as a JSON object whose members members appends,
// each after a comma.
func AppendObject[T any](b []byte, v *T, members func(*T, []byte) []byte) []byte {
	n := len(b)
	b = members(v, b)
	if len(b) == n {
		return append(b, '{', '}')
	}
	b[n] = '{' // the first member's comma
	return append(b, '}')
}

// String appends a string member.
func String(b []byte, key, s string) []byte { return AppendString(append(b, key...), s) }

// StringOmitEmpty appends a string member unless it is "".
func StringOmitEmpty(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return String(b, key, s)
}

// StrPtr appends a *string member: null when it is nil.
func StrPtr(b []byte, key string, p *string) []byte { return AppendStrPtr(append(b, key...), p) }

// StrPtrOmitEmpty appends a *string member unless it is nil.
func StrPtrOmitEmpty(b []byte, key string, p *string) []byte {
	if p == nil {
		return b
	}
	return String(b, key, *p)
}

// Int appends an integer member (of any integer type, converted).
func Int(b []byte, key string, n int64) []byte { return strconv.AppendInt(append(b, key...), n, 10) }

// IntOmitEmpty appends an integer member unless it is 0.
func IntOmitEmpty(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), n, 10)
}

// Bool appends a boolean member.
func Bool(b []byte, key string, v bool) []byte { return strconv.AppendBool(append(b, key...), v) }

// BoolOmitEmpty appends a boolean member unless it is false.
func BoolOmitEmpty(b []byte, key string, v bool) []byte {
	if !v {
		return b
	}
	return append(append(b, key...), "true"...)
}

// Raw appends a json.RawMessage member (see AppendRaw).
func Raw(b []byte, key string, raw json.RawMessage) []byte { return AppendRaw(append(b, key...), raw) }

// RawOmitEmpty appends a json.RawMessage member unless it is empty.
func RawOmitEmpty(b []byte, key string, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return b
	}
	return Raw(b, key, raw)
}

// Strings appends a []string member: null when it is nil.
func Strings(b []byte, key string, s []string) []byte {
	return AppendSlice(append(b, key...), s, AppendStr)
}

// StringsOmitEmpty appends a []string member unless it is empty.
func StringsOmitEmpty(b []byte, key string, s []string) []byte {
	if len(s) == 0 {
		return b
	}
	return Strings(b, key, s)
}

// IntMap appends a map[string]int member (see AppendIntMap).
func IntMap(b []byte, key string, m map[string]int) []byte {
	return AppendIntMap(append(b, key...), m)
}

// IntMapOmitEmpty appends a map[string]int member unless it is empty.
func IntMapOmitEmpty(b []byte, key string, m map[string]int) []byte {
	if len(m) == 0 {
		return b
	}
	return IntMap(b, key, m)
}

// Object appends a record member, which members writes (see AppendObject).
// encoding/json never leaves a struct out, omitempty or not.
func Object[E any](b []byte, key string, v *E, members func(*E, []byte) []byte) []byte {
	return AppendObject(append(b, key...), v, members)
}

// ObjectPtr appends a pointer-to-record member: null when it is nil.
func ObjectPtr[E any](b []byte, key string, p *E, members func(*E, []byte) []byte) []byte {
	if p == nil {
		return append(append(b, key...), "null"...)
	}
	return Object(b, key, p, members)
}

// ObjectPtrOmitEmpty appends a pointer-to-record member unless it is nil.
func ObjectPtrOmitEmpty[E any](b []byte, key string, p *E, members func(*E, []byte) []byte) []byte {
	if p == nil {
		return b
	}
	return Object(b, key, p, members)
}

// Objects appends a slice-of-records member: null when it is nil.
func Objects[E any](b []byte, key string, s []E, members func(*E, []byte) []byte) []byte {
	return AppendSlice(append(b, key...), s, func(b []byte, v *E) []byte { return AppendObject(b, v, members) })
}

// ObjectsOmitEmpty appends a slice-of-records member unless it is empty.
func ObjectsOmitEmpty[E any](b []byte, key string, s []E, members func(*E, []byte) []byte) []byte {
	if len(s) == 0 {
		return b
	}
	return Objects(b, key, s, members)
}
