package spool

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A decoder reads the store's records (see jsonenc.go) without
// reflection, with json.Unmarshal's semantics: the whole input must be
// one valid JSON value (whitespace around it allowed); unknown members
// are skipped; member names match exactly, else case-insensitively;
// null leaves a string, number or struct member as it was and sets a
// pointer, map or slice to nil; a later duplicate member overwrites (or,
// for an object, merges into) an earlier one; a value of the wrong type
// is an error. Nesting deeper than encoding/json's limit is an error.
type decoder struct {
	b     []byte
	i     int
	depth int
	err   error
}

// errSyntax and errType are the decoder's errors. Callers only tell
// success from failure, as they did with json.Unmarshal.
var (
	errSyntax = errors.New("json: syntax error")
	errType   = errors.New("json: value of the wrong type")
	errDepth  = errors.New("json: exceeded max depth")
)

const maxJSONDepth = 10000 // encoding/json's nesting limit

// decodeJSON decodes data into a record with fn, which reads one value.
func decodeJSON(data []byte, fn func(d *decoder)) error {
	d := &decoder{b: data}
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

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.i = len(d.b) // stop
}

func (d *decoder) ws() {
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
func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// null consumes a null literal if one is next.
func (d *decoder) null() bool {
	if d.peek() != 'n' {
		return false
	}
	d.literal("null")
	return d.err == nil
}

func (d *decoder) literal(lit string) {
	if !bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		d.fail(errSyntax)
		return
	}
	d.i += len(lit)
}

// object reads an object, calling member for each name with the decoder
// positioned at its value, which member must consume. A null leaves
// everything as it was; another value is a type error.
func (d *decoder) object(member func(name []byte)) {
	switch d.peek() {
	case '{':
	case 'n':
		d.null()
		return
	default:
		d.typeMismatch()
		return
	}
	d.i++
	if d.depth++; d.depth > maxJSONDepth {
		d.fail(errDepth)
		return
	}
	if d.peek() == '}' {
		d.i++
		d.depth--
		return
	}
	for d.err == nil {
		if d.peek() != '"' {
			d.fail(errSyntax)
			return
		}
		name := d.stringBytes()
		if d.peek() != ':' {
			d.fail(errSyntax)
			return
		}
		d.i++
		d.ws()
		member(name)
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return
		default:
			d.fail(errSyntax)
		}
	}
}

// typeMismatch skips a well-formed value of the wrong type and records a
// type error (a syntax error, if the value is not well formed).
func (d *decoder) typeMismatch() {
	d.skip()
	d.fail(errType)
}

// skip consumes one value of any type, checking its syntax.
func (d *decoder) skip() {
	switch c := d.peek(); {
	case c == '{':
		d.object(func([]byte) { d.skip() })
	case c == '[':
		d.array(d.skip)
	case c == '"':
		d.stringBytes()
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

// array reads an array, calling elem for each element with the decoder
// positioned at it.
func (d *decoder) array(elem func()) {
	if d.peek() != '[' {
		d.typeMismatch()
		return
	}
	d.i++
	if d.depth++; d.depth > maxJSONDepth {
		d.fail(errDepth)
		return
	}
	if d.peek() == ']' {
		d.i++
		d.depth--
		return
	}
	for d.err == nil {
		d.ws()
		elem()
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.depth--
			return
		default:
			d.fail(errSyntax)
		}
	}
}

// number consumes a number and returns its text; it reports whether the
// number is an integer (no fraction, no exponent).
func (d *decoder) number() (text []byte, integer bool) {
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
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		d.fail(errSyntax)
		return nil, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.fail(errSyntax)
			return nil, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.fail(errSyntax)
			return nil, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	d.i = i
	return b[start:i], integer
}

// stringBytes consumes a string and returns its unquoted value, which may
// alias the input.
func (d *decoder) stringBytes() []byte {
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
	out := append([]byte(nil), b[start:i]...)
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
			if i+1 >= len(b) {
				d.fail(errSyntax)
				return nil
			}
			i++
			switch b[i] {
			case '"', '\\', '/':
				out = append(out, b[i])
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(b[i+1:])
				if r < 0 {
					d.fail(errSyntax)
					return nil
				}
				i += 4
				if utf16.IsSurrogate(r) {
					// A valid pair is one rune; anything else is U+FFFD
					// (and the next escape is read on its own).
					if i+2 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
						if r2 := hex4(b[i+3:]); r2 >= 0 {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								out = utf8.AppendRune(out, dec)
								i += 6
								break
							}
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				d.fail(errSyntax)
				return nil
			}
			i++
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			out = utf8.AppendRune(out, r) // invalid UTF-8 becomes U+FFFD
			i += size
		}
	}
	d.fail(errSyntax) // unterminated
	return nil
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

// str reads a string member into *p (null leaves it).
func (d *decoder) str(p *string) {
	switch d.peek() {
	case '"':
		*p = string(d.stringBytes())
	case 'n':
		d.null()
	default:
		d.typeMismatch()
	}
}

// int64 reads an integer member into *p (null leaves it).
func (d *decoder) int64(p *int64) {
	switch c := d.peek(); {
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
		d.null()
	default:
		d.typeMismatch()
	}
}

func (d *decoder) int(p *int) {
	n := int64(*p)
	d.int64(&n)
	*p = int(n)
}

func (d *decoder) bool(p *bool) {
	switch d.peek() {
	case 't':
		d.literal("true")
		*p = true
	case 'f':
		d.literal("false")
		*p = false
	case 'n':
		d.null()
	default:
		d.typeMismatch()
	}
}

// raw reads any value into *p, verbatim (null is the literal null).
func (d *decoder) raw(p *json.RawMessage) {
	d.ws()
	start := d.i
	d.skip()
	if d.err == nil {
		*p = append((*p)[:0], d.b[start:d.i]...)
	}
}

// name matches a member name against a record's names: exactly, else
// case-insensitively as encoding/json does. It returns "" when none
// matches.
func name(got []byte, names []string) string {
	for _, n := range names {
		if string(got) == n {
			return n
		}
	}
	for _, n := range names {
		if bytes.EqualFold(got, []byte(n)) {
			return n
		}
	}
	return ""
}

var threadNames = []string{"thread_id", "run_id", "task_id", "subject", "created_by", "assigned_to",
	"status", "priority", "latest_message_id", "created_at", "updated_at", "message_count", "last_event_id"}

// threadMember reads member n of a Thread; it reports whether n is one.
func (d *decoder) threadMember(t *Thread, n string) bool {
	switch n {
	case "thread_id":
		d.str(&t.ThreadID)
	case "run_id":
		d.str(&t.RunID)
	case "task_id":
		d.str(&t.TaskID)
	case "subject":
		d.str(&t.Subject)
	case "created_by":
		d.str(&t.CreatedBy)
	case "assigned_to":
		d.str(&t.AssignedTo)
	case "status":
		d.str(&t.Status)
	case "priority":
		d.str(&t.Priority)
	case "latest_message_id":
		d.str(&t.LatestMessageID)
	case "created_at":
		d.str(&t.CreatedAt)
	case "updated_at":
		d.str(&t.UpdatedAt)
	case "message_count":
		d.int(&t.MessageCount)
	case "last_event_id":
		d.int64(&t.LastEventID)
	default:
		return false
	}
	return true
}

var headerNames = append(threadNames[:len(threadNames):len(threadNames)],
	"lease", "lease_rev", "last_from", "log_pos", "last_event", "origin")

func (d *decoder) header(h *header) {
	d.object(func(got []byte) {
		n := name(got, headerNames)
		if d.threadMember(&h.Thread, n) {
			return
		}
		switch n {
		case "lease":
			if d.null() {
				h.Lease = nil
				return
			}
			if h.Lease == nil {
				h.Lease = new(Lease)
			}
			d.lease(h.Lease)
		case "lease_rev":
			d.int64(&h.LeaseRev)
		case "last_from":
			if d.null() {
				h.LastFrom = nil
				return
			}
			if d.peek() != '{' {
				d.typeMismatch()
				return
			}
			if h.LastFrom == nil {
				h.LastFrom = map[string]int{}
			}
			d.object(func(k []byte) {
				v := 0 // as encoding/json: each element starts from zero
				d.int(&v)
				if d.err == nil {
					h.LastFrom[string(k)] = v
				}
			})
		case "log_pos":
			d.pos(&h.LogPos)
		case "last_event":
			if d.null() {
				h.LastEvent = nil
				return
			}
			if h.LastEvent == nil {
				h.LastEvent = new(Event)
			}
			d.event(h.LastEvent)
		case "origin":
			if d.null() {
				h.Origin = nil
				return
			}
			if h.Origin == nil {
				h.Origin = new(Origin)
			}
			d.object(func(got []byte) {
				switch name(got, []string{"descriptor", "sha256"}) {
				case "descriptor":
					d.str(&h.Origin.Descriptor)
				case "sha256":
					d.str(&h.Origin.SHA256)
				default:
					d.skip()
				}
			})
		default:
			d.skip()
		}
	})
}

func (d *decoder) pos(p *Pos) {
	d.object(func(got []byte) {
		switch name(got, []string{"segment", "offset"}) {
		case "segment":
			d.int64(&p.Segment)
		case "offset":
			d.int64(&p.Offset)
		default:
			d.skip()
		}
	})
}

var leaseNames = []string{"thread_id", "agent_id", "lease_token", "claimed_at", "expires_at", "released_at", "rev"}

func (d *decoder) lease(l *Lease) {
	d.object(func(got []byte) {
		switch name(got, leaseNames) {
		case "thread_id":
			d.str(&l.ThreadID)
		case "agent_id":
			d.str(&l.AgentID)
		case "lease_token":
			d.int64(&l.LeaseToken)
		case "claimed_at":
			d.str(&l.ClaimedAt)
		case "expires_at":
			d.str(&l.ExpiresAt)
		case "released_at":
			d.str(&l.ReleasedAt)
		case "rev":
			d.int64(&l.Rev)
		default:
			d.skip()
		}
	})
}

var eventNames = []string{"event_id", "run_id", "task_id", "thread_id", "source", "event_type", "message_id",
	"summary", "payload_json", "created_at", "agent", "kind", "status", "state"}

func (d *decoder) event(ev *Event) {
	d.object(func(got []byte) {
		switch name(got, eventNames) {
		case "event_id":
			d.int64(&ev.EventID)
		case "run_id":
			d.str(&ev.RunID)
		case "task_id":
			d.str(&ev.TaskID)
		case "thread_id":
			d.str(&ev.ThreadID)
		case "source":
			d.str(&ev.Source)
		case "event_type":
			d.str(&ev.EventType)
		case "message_id":
			d.str(&ev.MessageID)
		case "summary":
			d.str(&ev.Summary)
		case "payload_json":
			d.raw(&ev.PayloadJSON)
		case "created_at":
			d.str(&ev.CreatedAt)
		case "agent":
			d.str(&ev.Agent)
		case "kind":
			d.str(&ev.Kind)
		case "status":
			d.str(&ev.Status)
		case "state":
			if d.null() {
				ev.State = nil
				return
			}
			if ev.State == nil {
				ev.State = new(header)
			}
			d.header(ev.State)
		default:
			d.skip()
		}
	})
}

var messageNames = []string{"message_id", "thread_id", "seq", "from_agent", "to_agent", "kind", "summary",
	"body", "payload_json", "created_at", "event_id", "artifacts", "status"}

// messageMember reads member n of a Message; it reports whether n is one.
func (d *decoder) messageMember(m *Message, n string) bool {
	switch n {
	case "message_id":
		d.str(&m.MessageID)
	case "thread_id":
		d.str(&m.ThreadID)
	case "seq":
		d.int(&m.Seq)
	case "from_agent":
		d.str(&m.FromAgent)
	case "to_agent":
		d.str(&m.ToAgent)
	case "kind":
		d.str(&m.Kind)
	case "summary":
		d.str(&m.Summary)
	case "body":
		d.str(&m.Body)
	case "payload_json":
		d.raw(&m.PayloadJSON)
	case "created_at":
		d.str(&m.CreatedAt)
	case "event_id":
		d.int64(&m.EventID)
	case "artifacts":
		if d.null() {
			m.Artifacts = nil
			return true
		}
		// As encoding/json: elements decode into the slice's existing
		// ones (up to its capacity), the slice ends at the array's length,
		// and [] is empty, not nil.
		n := 0
		d.array(func() {
			if n == len(m.Artifacts) {
				if n < cap(m.Artifacts) {
					m.Artifacts = m.Artifacts[:n+1]
				} else {
					m.Artifacts = append(m.Artifacts, Artifact{})
				}
			}
			d.artifact(&m.Artifacts[n])
			n++
		})
		if d.err == nil {
			if n == 0 {
				m.Artifacts = []Artifact{}
			}
			m.Artifacts = m.Artifacts[:n]
		}
	case "status":
		d.str(&m.Status)
	default:
		return false
	}
	return true
}

func (d *decoder) message(m *Message) {
	d.object(func(got []byte) {
		if !d.messageMember(m, name(got, messageNames)) {
			d.skip()
		}
	})
}

var msgFileNames = append(messageNames[:len(messageNames):len(messageNames)],
	"thread_header", "idempotency_key", "idempotency_command")

func (d *decoder) msgFile(m *msgFile) {
	d.object(func(got []byte) {
		n := name(got, msgFileNames)
		if d.messageMember(&m.Message, n) {
			return
		}
		switch n {
		case "thread_header":
			if d.null() {
				m.InitialHeader = nil
				return
			}
			if m.InitialHeader == nil {
				m.InitialHeader = new(header)
			}
			d.header(m.InitialHeader)
		case "idempotency_key":
			d.str(&m.IdempotencyKey)
		case "idempotency_command":
			d.str(&m.IdempotencyCommand)
		default:
			d.skip()
		}
	})
}

var artifactNames = []string{"artifact_id", "message_id", "path", "kind", "metadata_json", "created_at"}

func (d *decoder) artifact(a *Artifact) {
	d.object(func(got []byte) {
		switch name(got, artifactNames) {
		case "artifact_id":
			d.str(&a.ArtifactID)
		case "message_id":
			d.str(&a.MessageID)
		case "path":
			d.str(&a.Path)
		case "kind":
			d.str(&a.Kind)
		case "metadata_json":
			d.raw(&a.MetadataJSON)
		case "created_at":
			d.str(&a.CreatedAt)
		default:
			d.skip()
		}
	})
}

var cursorNames = []string{"thread_id", "agent_id", "last_read_message_id", "last_read_seq", "read_at"}

func (d *decoder) cursor(c *Cursor) {
	d.object(func(got []byte) {
		switch name(got, cursorNames) {
		case "thread_id":
			d.str(&c.ThreadID)
		case "agent_id":
			d.str(&c.AgentID)
		case "last_read_message_id":
			d.str(&c.LastReadMessageID)
		case "last_read_seq":
			d.int(&c.LastReadSeq)
		case "read_at":
			d.str(&c.ReadAt)
		default:
			d.skip()
		}
	})
}

var idemNames = []string{"key", "command", "thread_id", "message_id", "seq", "created_at"}

func (d *decoder) idemRecord(r *idemRecord) {
	d.object(func(got []byte) {
		switch name(got, idemNames) {
		case "key":
			d.str(&r.Key)
		case "command":
			d.str(&r.Command)
		case "thread_id":
			d.str(&r.ThreadID)
		case "message_id":
			d.str(&r.MessageID)
		case "seq":
			d.int(&r.Seq)
		case "created_at":
			d.str(&r.CreatedAt)
		default:
			d.skip()
		}
	})
}

// Typed entry points, each json.Unmarshal's equivalent for its record.

func unmarshalHeader(data []byte, h *header) error {
	return decodeJSON(data, func(d *decoder) { d.header(h) })
}

func unmarshalMsgFile(data []byte, m *msgFile) error {
	return decodeJSON(data, func(d *decoder) { d.msgFile(m) })
}

func unmarshalMessage(data []byte, m *Message) error {
	return decodeJSON(data, func(d *decoder) { d.message(m) })
}

func unmarshalLease(data []byte, l *Lease) error {
	return decodeJSON(data, func(d *decoder) { d.lease(l) })
}

func unmarshalEvent(data []byte, ev *Event) error {
	return decodeJSON(data, func(d *decoder) { d.event(ev) })
}

func unmarshalCursor(data []byte, c *Cursor) error {
	return decodeJSON(data, func(d *decoder) { d.cursor(c) })
}

func unmarshalIdemRecord(data []byte, r *idemRecord) error {
	return decodeJSON(data, func(d *decoder) { d.idemRecord(r) })
}
