package jsonrec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
	"unsafe"
)

// Large records. A message may carry a body of tens of megabytes, and a
// process that handles one should hold it once or twice, not once per
// step (read, unescape, copy into a string, encode, copy into a line).
// The functions here let callers size buffers exactly before encoding,
// decode strings without copying them out of a buffer they hand over,
// and read one member of a large object without reading the rest.

// StringLen is the length of AppendString(nil, s): what s takes as a JSON
// string, quotes included. A caller encoding a large value sizes its
// buffer with it, so that appending never copies what is already there.
func StringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c != '"' && c != '\\':
				n++
			case c == '\\', c == '"', c == '\b', c == '\f', c == '\n', c == '\r', c == '\t':
				n += 2
			default:
				n += 6 // \u00XX
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6 // \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// DecodeOwned is Decode for a buffer the caller hands over: data must
// not be read or written by anyone once it is passed, because the long
// strings decoded from it share its memory (a string without escapes is
// the bytes where it stands, and one with escapes is unescaped in
// place, over its own escaped form). So a record read from a file costs
// the file's bytes once, however large its strings are. Short strings
// are copied, so that keeping one does not keep the buffer.
func DecodeOwned(data []byte, fn func(d *Decoder)) error {
	return (&Decoder{b: data, owned: true}).whole(fn)
}

// skipString consumes the string at d.i, checked as stringBytes checks
// it, without unescaping it anywhere: skipping a member (a message's
// body, when only its head is read) costs no memory, however large.
func (d *Decoder) skipString() {
	b := d.b
	i := d.i + 1
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			d.i = i + 1
			return
		case c < 0x20:
			d.fail(errSyntax)
			return
		case c != '\\':
			i++
			continue
		}
		if i+1 >= len(b) {
			break
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if hex4(b[i+2:]) < 0 {
				d.fail(errSyntax)
				return
			}
			i += 6
		default:
			d.fail(errSyntax)
			return
		}
	}
	d.fail(errSyntax) // unterminated
}

// DecodePrefix decodes with fn the one value data starts with (after
// white space) and returns how many bytes it took; what follows is not
// looked at. A value cut short by the end of data is an error, as a
// damaged one is: a caller reading a file's first bytes reads on.
func DecodePrefix(data []byte, fn func(d *Decoder)) (int, error) {
	d := &Decoder{b: data}
	d.ws()
	fn(d)
	if d.err != nil {
		return 0, d.err
	}
	return d.i, nil
}

// ownedStr reads the string at d.i of a buffer the Decoder owns (see
// DecodeOwned), with stringBytes' semantics, and returns it without a
// copy: unescaped in place, where the escapes stood (see unquote).
func (d *Decoder) ownedStr() string { return aliasString(d.unquote(true)) }

// aliasMin is the length from which a decoded string shares its
// buffer. A shorter one (an id, a name, a time) is copied: a process
// that keeps it must not keep the whole buffer (a message's file, with
// its body) with it.
const aliasMin = 4 << 10

// aliasString is b as a string, sharing its memory when it is long: b
// belongs to a Decoder that owns its input, and nothing writes it again.
func aliasString(b []byte) string {
	if len(b) < aliasMin {
		return string(b)
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// ErrNoMember is returned by ReadMember when the object has no member of
// the name.
var ErrNoMember = errors.New("json: no such member")

// ReadMember reads the JSON object r holds only as far as its member
// name (matched exactly, else case-insensitively) and returns that
// member's value (its bytes, without the white space between tokens).
// The members before it are checked for
// syntax and skipped without being kept, whatever their size; nothing
// after it is read. A value longer than max bytes is an error, so that a
// damaged file cannot make the caller hold more than it meant to.
//
// Unlike Decode, it takes the first member of the name (a later
// duplicate is not looked for) and does not check what follows it: it
// is for records whose writer puts a small member first and a large one
// after, such as a thread's first message with its initial header.
func ReadMember(r *bufio.Reader, name string, max int) (json.RawMessage, error) {
	s := &memberScanner{r: r, max: max, kept: make([]byte, 0, 256)}
	c, err := s.next()
	if err != nil {
		return nil, err
	}
	if c != '{' {
		return nil, errType
	}
	c, err = s.next()
	if err != nil || c == '}' {
		return nil, orNoMember(err)
	}
	for {
		if c != '"' {
			return nil, errSyntax
		}
		s.keep, s.kept = true, s.kept[:0]
		if err := s.str(); err != nil {
			return nil, err
		}
		key := s.kept[:len(s.kept)-1] // without the closing quote
		match := len(key) == len(name) && (string(key) == name || bytes.EqualFold(key, []byte(name)))
		s.keep = false
		if c, err = s.next(); err != nil || c != ':' {
			return nil, orSyntax(err)
		}
		if c, err = s.next(); err != nil {
			return nil, err
		}
		s.keep, s.kept = match, s.kept[:0]
		if match {
			s.kept = append(s.kept, c)
		}
		if err := s.value(c, 0); err != nil {
			return nil, err
		}
		if match {
			return json.RawMessage(s.kept), nil
		}
		c, err = s.next()
		switch {
		case err != nil:
			return nil, orSyntax(err)
		case c == '}':
			return nil, ErrNoMember
		case c != ',':
			return nil, errSyntax
		}
		if c, err = s.next(); err != nil {
			return nil, err
		}
	}
}

func orNoMember(err error) error {
	if err != nil {
		return err
	}
	return ErrNoMember
}

func orSyntax(err error) error {
	if err != nil {
		return err
	}
	return errSyntax
}

// memberScanner reads JSON from a stream, keeping what it reads only
// while keep is set (the member ReadMember returns, a member name).
type memberScanner struct {
	r    *bufio.Reader
	keep bool
	kept []byte
	max  int
}

// next returns the next byte that is not white space (consumed, and kept
// when keeping); the end of the input is a syntax error.
func (s *memberScanner) next() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err == io.EOF {
			return 0, errSyntax
		}
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if s.keep {
			if err := s.add([]byte{c}); err != nil {
				return 0, err
			}
		}
		return c, nil
	}
}

func (s *memberScanner) add(p []byte) error {
	if len(s.kept)+len(p) > s.max {
		return errTooLong
	}
	s.kept = append(s.kept, p...)
	return nil
}

var errTooLong = errors.New("json: member longer than the reader's limit")

// str consumes a string whose opening quote was read, up to and with its
// closing quote, a buffer at a time.
func (s *memberScanner) str() error {
	slashes := 0 // backslashes right before the current position
	for {
		chunk, err := s.r.ReadSlice('"')
		if s.keep && len(chunk) > 0 {
			if aerr := s.add(chunk); aerr != nil {
				return aerr
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			slashes = trailingSlashes(chunk, slashes)
			continue
		case err == io.EOF:
			return errSyntax
		case err != nil:
			return err
		}
		if trailingSlashes(chunk[:len(chunk)-1], slashes)%2 == 0 {
			return nil
		}
		slashes = 0 // an escaped quote: the run of backslashes ends with it
	}
}

// trailingSlashes counts the backslashes that end b, continuing a run of
// prev when b is nothing but backslashes.
func trailingSlashes(b []byte, prev int) int {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	if n == len(b) {
		return prev + n
	}
	return n
}

// value consumes a value whose first byte c was read.
func (s *memberScanner) value(c byte, depth int) error {
	if depth > maxJSONDepth {
		return errDepth
	}
	switch {
	case c == '"':
		return s.str()
	case c == '{' || c == '[':
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		c, err := s.next()
		if err != nil {
			return err
		}
		if c == close {
			return nil
		}
		for {
			if close == '}' {
				if c != '"' {
					return errSyntax
				}
				if err := s.str(); err != nil {
					return err
				}
				if c, err = s.next(); err != nil || c != ':' {
					return orSyntax(err)
				}
				if c, err = s.next(); err != nil {
					return err
				}
			}
			if err := s.value(c, depth+1); err != nil {
				return err
			}
			if c, err = s.next(); err != nil {
				return err
			}
			if c == close {
				return nil
			}
			if c != ',' {
				return errSyntax
			}
			if c, err = s.next(); err != nil {
				return err
			}
		}
	case c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n':
		// A number or a literal: the bytes up to the next delimiter,
		// checked by the one decoder that reads them all when kept.
		tok := []byte{c}
		for {
			p, err := s.r.Peek(1)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			x := p[0]
			if !(x >= '0' && x <= '9' || x >= 'a' && x <= 'z' || x == '.' || x == '+' || x == '-' || x == 'E') {
				break
			}
			s.r.ReadByte()
			if len(tok) < 64 {
				tok = append(tok, x)
			}
			if s.keep {
				if err := s.add([]byte{x}); err != nil {
					return err
				}
			}
		}
		if !validScalar(tok) {
			return errSyntax
		}
		return nil
	}
	return errSyntax
}

// validScalar reports whether tok is a JSON number or literal.
func validScalar(tok []byte) bool {
	switch string(tok) {
	case "true", "false", "null":
		return true
	}
	d := &Decoder{b: tok}
	d.number()
	return d.err == nil && d.i == len(tok)
}
