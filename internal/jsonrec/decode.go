package jsonrec

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A Decoder reads the store's records (see jsonenc.go) without
// reflection, with json.Unmarshal's semantics: the whole input must be
// one valid JSON value (whitespace around it allowed); unknown members
// are skipped; member names match exactly, else case-insensitively;
// null leaves a string, number or struct member as it was and sets a
// pointer, map or slice to nil; a later duplicate member overwrites (or,
// for an object, merges into) an earlier one; a value of the wrong type
// is an error. Nesting deeper than encoding/json's limit is an error.
type Decoder struct {
	b     []byte
	i     int
	depth int
	err   error
	owned bool // b was handed over: strings share it (DecodeOwned)
}

// errSyntax, errType and errDepth are the Decoder's errors. Callers only
// tell success from failure, as they did with json.Unmarshal.
var (
	errSyntax = errors.New("json: syntax error")
	errType   = errors.New("json: value of the wrong type")
	errDepth  = errors.New("json: exceeded max depth")
)

const maxJSONDepth = 10000 // encoding/json's nesting limit

// Decode decodes data with fn, which reads one value: the whole of data
// must be that value, with white space around it at most.
func Decode(data []byte, fn func(d *Decoder)) error {
	return (&Decoder{b: data}).whole(fn)
}

// whole reads with fn the one value that must be all of d's input.
func (d *Decoder) whole(fn func(d *Decoder)) error {
	d.ws()
	fn(d)
	if d.err != nil {
		return d.err
	}
	d.ws()
	if d.i != len(d.b) {
		return errSyntax
	}
	return nil
}

func (d *Decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.i = len(d.b) // stop
}

func (d *Decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (d *Decoder) Peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// Null consumes a null literal if one is next.
func (d *Decoder) Null() bool {
	if d.Peek() != 'n' {
		return false
	}
	d.literal("null")
	return d.err == nil
}

func (d *Decoder) literal(lit string) {
	if !bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		d.fail(errSyntax)
		return
	}
	d.i += len(lit)
}

// Object reads an object, calling member for each name with the Decoder
// positioned at its value, which member must consume. A null leaves
// everything as it was; another value is a type error.
func (d *Decoder) Object(member func(name []byte)) {
	switch d.Peek() {
	case '{':
	case 'n':
		d.Null()
		return
	default:
		d.TypeMismatch()
		return
	}
	if !d.enter('}') {
		return
	}
	for {
		if d.Peek() != '"' {
			d.fail(errSyntax)
			return
		}
		name := d.stringBytes()
		if d.Peek() != ':' {
			d.fail(errSyntax)
			return
		}
		d.i++
		d.ws()
		member(name)
		if !d.more('}') {
			return
		}
	}
}

// enter consumes the opening bracket of an object or an array and reports
// whether members follow (false for {} and [], or past the depth limit).
func (d *Decoder) enter(close byte) bool {
	d.i++
	if d.depth++; d.depth > maxJSONDepth {
		d.fail(errDepth)
		return false
	}
	if d.Peek() == close {
		d.i++
		d.depth--
		return false
	}
	return true
}

// more consumes what follows a member or an element: a comma, when more
// follow, or the closing bracket.
func (d *Decoder) more(close byte) bool {
	switch d.Peek() {
	case ',':
		d.i++
		return true
	case close:
		d.i++
		d.depth--
		return false
	}
	d.fail(errSyntax)
	return false
}

// TypeMismatch skips a well-formed value of the wrong type and records a
// type error (a syntax error, if the value is not well formed).
func (d *Decoder) TypeMismatch() {
	d.Skip()
	d.fail(errType)
}

// Skip consumes one value of any type, checking its syntax.
func (d *Decoder) Skip() {
	switch c := d.Peek(); {
	case c == '{':
		d.Object(func([]byte) { d.Skip() })
	case c == '[':
		d.Array(d.Skip)
	case c == '"':
		d.skipString()
	case c == 't':
		d.literal("true")
	case c == 'f':
		d.literal("false")
	case c == 'n':
		d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		d.number()
	default:
		d.fail(errSyntax)
	}
}

// Array reads an array, calling elem for each element with the Decoder
// positioned at it.
func (d *Decoder) Array(elem func()) {
	if d.Peek() != '[' {
		d.TypeMismatch()
		return
	}
	if !d.enter(']') {
		return
	}
	for {
		d.ws()
		elem()
		if !d.more(']') {
			return
		}
	}
}

// number consumes a number and returns its text; it reports whether the
// number is an integer (no fraction, no exponent).
func (d *Decoder) number() (text []byte, integer bool) {
	start := d.i
	b := d.b
	i := d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i, _ = digits(b, i)
	default:
		d.fail(errSyntax)
		return nil, false
	}
	integer = true
	ok := true
	if i < len(b) && b[i] == '.' {
		integer = false
		i, ok = digits(b, i+1)
	}
	if ok && i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		i, ok = digits(b, i)
	}
	if !ok {
		d.fail(errSyntax)
		return nil, false
	}
	d.i = i
	return b[start:i], integer
}

// digits skips one or more decimal digits from b[i]; it reports false
// when there is none.
func digits(b []byte, i int) (int, bool) {
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i, i > start
}

// stringBytes consumes a string and returns its unquoted value, which may
// alias the input.
func (d *Decoder) stringBytes() []byte { return d.unquote(false) }

// unquote consumes the string at d.i and returns its value, with
// json.Unmarshal's rules: a broken or lone surrogate escape and an invalid
// UTF-8 byte both stand for U+FFFD. A string with neither escapes nor
// invalid UTF-8 is the input's bytes where they stand. Another is
// unescaped into a buffer of its own or, when inPlace (the Decoder owns
// its input: see DecodeOwned), over its own escaped form: writing never
// passes the input not yet read, since an escape is never shorter than
// what it stands for. The one exception, an invalid UTF-8 byte (U+FFFD
// takes three), which the store never writes, moves the string to a
// buffer of its own when there is no room.
func (d *Decoder) unquote(inPlace bool) []byte {
	b := d.b
	i := d.i + 1
	start := i
	// Fast path: no escapes, no control characters, valid UTF-8.
	for i < len(b) {
		c := b[i]
		if c == '"' {
			d.i = i + 1
			return b[start:i]
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	var out []byte
	if inPlace {
		out = b[start:i:len(b)]
	} else {
		out = append([]byte(nil), b[start:i]...)
	}
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			d.i = i + 1
			return out
		case c < 0x20:
			d.fail(errSyntax)
			return nil
		case c == '\\':
			if i+1 < len(b) { // the common escapes, without a call
				if e := unescaped[b[i+1]]; e != 0 {
					out = append(out, e)
					i += 2
					continue
				}
			}
			var ok bool
			if out, i, ok = unescapeU(out, b, i); !ok {
				d.fail(errSyntax)
				return nil
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if inPlace && r == utf8.RuneError && size == 1 && start+len(out)+3 > i+1 {
				out = append(make([]byte, 0, len(out)+3+len(b)-i-1), out...)
				inPlace = false
			}
			out = utf8.AppendRune(out, r) // invalid UTF-8 becomes U+FFFD
			i += size
		}
	}
	d.fail(errSyntax) // unterminated
	return nil
}

// unescaped maps the character after a backslash to what its two-byte
// escape stands for (0: not one of them).
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescapeU appends what the \u escape at b[i] (a backslash) stands for
// to out and returns where reading resumes; ok is false when b[i] does
// not start a valid \u escape. A surrogate followed by a \u escape of
// its pair is one rune; any other surrogate is U+FFFD, and the escape
// after it is read on its own. Everything is read before anything is
// appended, so out may be written over b (see unquote).
func unescapeU(out, b []byte, i int) (_ []byte, next int, ok bool) {
	if i+1 >= len(b) || b[i+1] != 'u' {
		return out, i, false
	}
	r := hex4(b[i+2:])
	if r < 0 {
		return out, i, false
	}
	i += 6
	if utf16.IsSurrogate(r) {
		if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
			if r2 := hex4(b[i+2:]); r2 >= 0 {
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					return utf8.AppendRune(out, dec), i + 6, true
				}
			}
		}
		r = utf8.RuneError
	}
	return utf8.AppendRune(out, r), i, true
}

// hex4 reads four hex digits, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Str reads a string member into *p (null leaves it).
func (d *Decoder) Str(p *string) {
	switch d.Peek() {
	case '"':
		if d.owned {
			*p = d.ownedStr()
			return
		}
		*p = string(d.stringBytes())
	case 'n':
		d.Null()
	default:
		d.TypeMismatch()
	}
}

// Int64 reads an integer member into *p (null leaves it).
func (d *Decoder) Int64(p *int64) {
	switch c := d.Peek(); {
	case c == '-' || c >= '0' && c <= '9':
		text, integer := d.number()
		if d.err != nil {
			return
		}
		n, err := strconv.ParseInt(string(text), 10, 64)
		if !integer || err != nil {
			d.fail(errType)
			return
		}
		*p = n
	case c == 'n':
		d.Null()
	default:
		d.TypeMismatch()
	}
}

func (d *Decoder) Int(p *int) {
	n := int64(*p)
	d.Int64(&n)
	*p = int(n)
}

func (d *Decoder) Bool(p *bool) {
	switch d.Peek() {
	case 't':
		d.literal("true")
		*p = true
	case 'f':
		d.literal("false")
		*p = false
	case 'n':
		d.Null()
	default:
		d.TypeMismatch()
	}
}

// Raw reads any value into *p, verbatim (null is the literal null).
func (d *Decoder) Raw(p *json.RawMessage) {
	d.ws()
	start := d.i
	d.Skip()
	if d.err == nil {
		*p = append((*p)[:0], d.b[start:d.i]...)
	}
}

// Err is the first error the decoder met, if any.
func (d *Decoder) Err() error { return d.err }
