// Package jsonrec encodes and decodes the records inbox writes and reads
// (threads, messages, leases, events, the store's own files) without
// reflection. Every inbox command is a short-lived process, and the first
// reflective encode or decode in a process costs a few hundred
// microseconds of cold code and type walking: measured with bench/abtime,
// 7–17 % of a whole send, fetch, claim or show.
//
// The encoders and decoders of each record type are generated from its
// struct tags by internal/recordgen (see the go:generate lines), on top of
// the primitives here. The output is byte for byte what encoding/json
// writes with HTML escaping off, and decoding has json.Unmarshal's
// semantics: the whole input is one JSON value; unknown members are
// skipped; names match exactly, else case-insensitively; null leaves a
// string, number or struct as it was and sets a pointer, slice or map to
// nil; a later duplicate member overwrites an earlier one; a value of the
// wrong type is an error. Tests in the packages that use it hold both
// claims against encoding/json, and fuzz them.
package jsonrec

import (
	"bytes"
	"slices"
	"strconv"
)

// Match returns the index in names of the member name got: an exact match,
// else the first case-insensitive one, as encoding/json matches; -1 when
// none does.
func Match(got []byte, names []string) int {
	for i, n := range names {
		if string(got) == n {
			return i
		}
	}
	for i, n := range names {
		if bytes.EqualFold(got, []byte(n)) {
			return i
		}
	}
	return -1
}

// ReadPtr reads a pointer to a record: null sets it to nil, an object
// decodes into what it points to (allocated if need be).
func ReadPtr[E any](d *Decoder, pp **E, read func(*Decoder, *E)) {
	if d.Null() {
		*pp = nil
		return
	}
	if *pp == nil {
		*pp = new(E)
	}
	read(d, *pp)
}

// ReadSlice reads an array as encoding/json reads a slice: elements decode
// into the slice's existing ones (up to its capacity), the slice ends at
// the array's length, [] is empty and null is nil.
func ReadSlice[E any](d *Decoder, p *[]E, read func(*Decoder, *E)) {
	if d.Null() {
		*p = nil
		return
	}
	s := *p
	n := 0
	d.Array(func() {
		if n == len(s) {
			if n < cap(s) {
				s = s[:n+1]
			} else {
				var zero E
				s = append(s, zero)
			}
		}
		read(d, &s[n])
		n++
	})
	if d.err == nil {
		if n == 0 {
			s = []E{}
		}
		*p = s[:n]
	}
}

// AppendSlice appends s as an array, null when it is nil.
func AppendSlice[E any](b []byte, s []E, write func([]byte, *E) []byte) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = write(b, &s[i])
	}
	return append(b, ']')
}

// ReadStrPtr reads a string or null into *p.
func ReadStrPtr(d *Decoder, p **string) {
	if d.Null() {
		*p = nil
		return
	}
	var s string
	if *p != nil {
		s = **p
	}
	d.Str(&s)
	if d.err == nil {
		*p = &s
	}
}

// AppendStrPtr appends *p as a string, or null.
func AppendStrPtr(b []byte, p *string) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return AppendString(b, *p)
}

// ReadString reads a string element (for ReadSlice).
func ReadString(d *Decoder, p *string) { d.Str(p) }

// AppendStr appends *p as a string (for AppendSlice).
func AppendStr(b []byte, p *string) []byte { return AppendString(b, *p) }

// ReadIntMap reads an object of integers as encoding/json reads a map:
// null makes it nil, an object adds to it, each value starting from zero.
func ReadIntMap(d *Decoder, p *map[string]int) {
	if d.Null() {
		*p = nil
		return
	}
	if d.Peek() != '{' {
		d.TypeMismatch()
		return
	}
	if *p == nil {
		*p = map[string]int{}
	}
	m := *p
	d.Object(func(k []byte) {
		v := 0
		d.Int(&v)
		if d.err == nil {
			m[string(k)] = v
		}
	})
}

// AppendIntMap appends m with its keys sorted, as encoding/json does; null
// when it is nil.
func AppendIntMap(b []byte, m map[string]int) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, k)
		b = strconv.AppendInt(append(b, ':'), int64(m[k]), 10)
	}
	return append(b, '}')
}
