package spool

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// Each record type the store writes is described once, as a list of its
// JSON members in encoding/json's order: the name, how to read the member
// into the record and how to write it, and (for omitempty members) when it
// is left out. The one description serves both directions, so a member
// cannot be written under one name and read under another.

// A field is one member of a record of type T. Plain members give an
// accessor (str, num, num64 or raw); others read and write themselves.
// The tables are package-level literals of functions that capture
// nothing, so the compiler lays them out statically: building them costs
// a process nothing at start-up.
type field[T any] struct {
	name      string
	str       func(*T) *string
	omitEmpty bool // a str member left out when empty
	num       func(*T) *int
	num64     func(*T) *int64
	raw       func(*T) *json.RawMessage
	read      func(d *decoder, v *T)
	write     func(b []byte, v *T) []byte
	omit      func(v *T) bool // nil: written unless omitEmpty says otherwise
}

func (f *field[T]) decode(d *decoder, v *T) {
	switch {
	case f.str != nil:
		d.str(f.str(v))
	case f.num != nil:
		d.int(f.num(v))
	case f.num64 != nil:
		d.int64(f.num64(v))
	case f.raw != nil:
		d.raw(f.raw(v))
	default:
		f.read(d, v)
	}
}

func (f *field[T]) encode(b []byte, v *T) []byte {
	switch {
	case f.str != nil:
		return appendString(b, *f.str(v))
	case f.num != nil:
		return strconv.AppendInt(b, int64(*f.num(v)), 10)
	case f.num64 != nil:
		return strconv.AppendInt(b, *f.num64(v), 10)
	case f.raw != nil:
		return appendRaw(b, *f.raw(v))
	}
	return f.write(b, v)
}

func (f *field[T]) omitted(v *T) bool {
	if f.omitEmpty {
		return *f.str(v) == ""
	}
	return f.omit != nil && f.omit(v)
}

// A record lists the members of T.
type record[T any] []field[T]

// append appends v as a JSON object.
func (r record[T]) append(b []byte, v *T) []byte {
	b = append(b, '{')
	first := true
	for i := range r {
		f := &r[i]
		if f.omitted(v) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, f.name...) // member names need no escaping
		b = append(b, '"', ':')
		b = f.encode(b, v)
	}
	return append(b, '}')
}

// decode reads an object (or null) into v: members match by name exactly,
// else case-insensitively, as encoding/json matches them; others are
// skipped.
func (r record[T]) decode(d *decoder, v *T) {
	d.object(func(got []byte) {
		if f := r.find(got); f != nil {
			f.decode(d, v)
		} else {
			d.skip()
		}
	})
}

func (r record[T]) find(got []byte) *field[T] {
	for i := range r {
		if string(got) == r[i].name {
			return &r[i]
		}
	}
	for i := range r {
		if bytes.EqualFold(got, []byte(r[i].name)) {
			return &r[i]
		}
	}
	return nil
}

// unmarshal decodes data into v with json.Unmarshal's rules.
func (r record[T]) unmarshal(data []byte, v *T) error {
	return decodeJSON(data, func(d *decoder) { r.decode(d, v) })
}

var threadRecord = record[Thread]{
	{name: "thread_id", str: func(t *Thread) *string { return &t.ThreadID }},
	{name: "run_id", str: func(t *Thread) *string { return &t.RunID }},
	{name: "task_id", str: func(t *Thread) *string { return &t.TaskID }},
	{name: "subject", str: func(t *Thread) *string { return &t.Subject }},
	{name: "created_by", str: func(t *Thread) *string { return &t.CreatedBy }},
	{name: "assigned_to", str: func(t *Thread) *string { return &t.AssignedTo }},
	{name: "status", str: func(t *Thread) *string { return &t.Status }},
	{name: "priority", str: func(t *Thread) *string { return &t.Priority }},
	{name: "latest_message_id", str: func(t *Thread) *string { return &t.LatestMessageID }},
	{name: "created_at", str: func(t *Thread) *string { return &t.CreatedAt }},
	{name: "updated_at", str: func(t *Thread) *string { return &t.UpdatedAt }},
	{name: "message_count", num: func(t *Thread) *int { return &t.MessageCount }},
	{name: "last_event_id", num64: func(t *Thread) *int64 { return &t.LastEventID }},
	{name: "mail", read: func(d *decoder, t *Thread) { d.bool(&t.Mail) },
		write: func(b []byte, t *Thread) []byte { return strconv.AppendBool(b, t.Mail) },
		omit:  func(t *Thread) bool { return !t.Mail }},
	{name: "lease_expired", read: func(d *decoder, t *Thread) { d.bool(&t.LeaseExpired) },
		write: func(b []byte, t *Thread) []byte { return strconv.AppendBool(b, t.LeaseExpired) },
		omit:  func(t *Thread) bool { return !t.LeaseExpired }},
}

var artifactRecord = record[Artifact]{
	{name: "artifact_id", str: func(a *Artifact) *string { return &a.ArtifactID }},
	{name: "message_id", str: func(a *Artifact) *string { return &a.MessageID }},
	{name: "path", str: func(a *Artifact) *string { return &a.Path }},
	{name: "kind", str: func(a *Artifact) *string { return &a.Kind }},
	{name: "metadata_json", raw: func(a *Artifact) *json.RawMessage { return &a.MetadataJSON }},
	{name: "created_at", str: func(a *Artifact) *string { return &a.CreatedAt }},
}

var messageRecord = record[Message]{
	{name: "message_id", str: func(m *Message) *string { return &m.MessageID }},
	{name: "thread_id", str: func(m *Message) *string { return &m.ThreadID }},
	{name: "seq", num: func(m *Message) *int { return &m.Seq }},
	{name: "from_agent", str: func(m *Message) *string { return &m.FromAgent }},
	{name: "to_agent", str: func(m *Message) *string { return &m.ToAgent }},
	{name: "kind", str: func(m *Message) *string { return &m.Kind }},
	{name: "summary", str: func(m *Message) *string { return &m.Summary }},
	{name: "body", str: func(m *Message) *string { return &m.Body }},
	{name: "payload_json", raw: func(m *Message) *json.RawMessage { return &m.PayloadJSON }},
	{name: "created_at", str: func(m *Message) *string { return &m.CreatedAt }},
	{name: "event_id", num64: func(m *Message) *int64 { return &m.EventID }},
	{name: "artifacts", read: readArtifacts, write: writeArtifacts,
		omit: func(m *Message) bool { return len(m.Artifacts) == 0 }},
	{name: "status", str: func(m *Message) *string { return &m.Status }, omitEmpty: true},
	{name: "damaged", read: func(d *decoder, m *Message) { d.bool(&m.Damaged) },
		write: func(b []byte, m *Message) []byte { return strconv.AppendBool(b, m.Damaged) },
		omit:  func(m *Message) bool { return !m.Damaged }},
}

// readArtifacts reads the artifacts array as encoding/json reads a slice:
// elements decode into the slice's existing ones (up to its capacity), the
// slice ends at the array's length, [] is empty and null is nil.
func readArtifacts(d *decoder, m *Message) {
	if d.null() {
		m.Artifacts = nil
		return
	}
	n := 0
	d.array(func() {
		if n == len(m.Artifacts) {
			if n < cap(m.Artifacts) {
				m.Artifacts = m.Artifacts[:n+1]
			} else {
				m.Artifacts = append(m.Artifacts, Artifact{})
			}
		}
		artifactRecord.decode(d, &m.Artifacts[n])
		n++
	})
	if d.err == nil {
		if n == 0 {
			m.Artifacts = []Artifact{}
		}
		m.Artifacts = m.Artifacts[:n]
	}
}

func writeArtifacts(b []byte, m *Message) []byte {
	b = append(b, '[')
	for i := range m.Artifacts {
		if i > 0 {
			b = append(b, ',')
		}
		b = artifactRecord.append(b, &m.Artifacts[i])
	}
	return append(b, ']')
}

var leaseRecord = record[Lease]{
	{name: "thread_id", str: func(l *Lease) *string { return &l.ThreadID }},
	{name: "agent_id", str: func(l *Lease) *string { return &l.AgentID }},
	{name: "lease_token", num64: func(l *Lease) *int64 { return &l.LeaseToken }},
	{name: "claimed_at", str: func(l *Lease) *string { return &l.ClaimedAt }},
	{name: "expires_at", str: func(l *Lease) *string { return &l.ExpiresAt }},
	// Lease.MarshalJSON's shape: rev (omitempty) before released_at, which
	// is null while the lease is not released.
	{name: "rev", num64: func(l *Lease) *int64 { return &l.Rev }, omit: func(l *Lease) bool { return l.Rev == 0 }},
	{name: "released_at", read: func(d *decoder, l *Lease) { d.str(&l.ReleasedAt) },
		write: func(b []byte, l *Lease) []byte {
			if l.ReleasedAt == "" {
				return append(b, "null"...)
			}
			return appendString(b, l.ReleasedAt)
		}},
}

var cursorRecord = record[Cursor]{
	{name: "thread_id", str: func(c *Cursor) *string { return &c.ThreadID }},
	{name: "agent_id", str: func(c *Cursor) *string { return &c.AgentID }},
	{name: "last_read_message_id", str: func(c *Cursor) *string { return &c.LastReadMessageID }},
	{name: "last_read_seq", num: func(c *Cursor) *int { return &c.LastReadSeq }},
	{name: "read_at", str: func(c *Cursor) *string { return &c.ReadAt }},
}

var posRecord = record[Pos]{
	{name: "segment", num64: func(p *Pos) *int64 { return &p.Segment }},
	{name: "offset", num64: func(p *Pos) *int64 { return &p.Offset }},
}

var originRecord = record[Origin]{
	{name: "descriptor", str: func(o *Origin) *string { return &o.Descriptor }},
	{name: "sha256", str: func(o *Origin) *string { return &o.SHA256 }},
}

var idemRecordFields = record[idemRecord]{
	{name: "key", str: func(r *idemRecord) *string { return &r.Key }},
	{name: "command", str: func(r *idemRecord) *string { return &r.Command }},
	{name: "thread_id", str: func(r *idemRecord) *string { return &r.ThreadID }},
	{name: "message_id", str: func(r *idemRecord) *string { return &r.MessageID }},
	{name: "seq", num: func(r *idemRecord) *int { return &r.Seq }},
	{name: "created_at", str: func(r *idemRecord) *string { return &r.CreatedAt }},
}

// The promoted members of an embedded struct (header's Thread,
// msgFile's Message) are listed again in the embedding record: written
// out, the tables stay static (TestRecordsPromoteEmbedded checks the
// lists agree). The header and the event refer to each other (a header
// holds its last event, an event the header after it); headerRef breaks
// the cycle for package initialisation.
var headerRecord = record[header]{
	{name: "thread_id", str: func(h *header) *string { return &h.ThreadID }},
	{name: "run_id", str: func(h *header) *string { return &h.RunID }},
	{name: "task_id", str: func(h *header) *string { return &h.TaskID }},
	{name: "subject", str: func(h *header) *string { return &h.Subject }},
	{name: "created_by", str: func(h *header) *string { return &h.CreatedBy }},
	{name: "assigned_to", str: func(h *header) *string { return &h.AssignedTo }},
	{name: "status", str: func(h *header) *string { return &h.Status }},
	{name: "priority", str: func(h *header) *string { return &h.Priority }},
	{name: "latest_message_id", str: func(h *header) *string { return &h.LatestMessageID }},
	{name: "created_at", str: func(h *header) *string { return &h.CreatedAt }},
	{name: "updated_at", str: func(h *header) *string { return &h.UpdatedAt }},
	{name: "message_count", num: func(h *header) *int { return &h.MessageCount }},
	{name: "last_event_id", num64: func(h *header) *int64 { return &h.LastEventID }},
	{name: "mail", read: func(d *decoder, h *header) { d.bool(&h.Mail) },
		write: func(b []byte, h *header) []byte { return strconv.AppendBool(b, h.Mail) },
		omit:  func(h *header) bool { return !h.Mail }},
	{name: "lease_expired", read: func(d *decoder, h *header) { d.bool(&h.LeaseExpired) },
		write: func(b []byte, h *header) []byte { return strconv.AppendBool(b, h.LeaseExpired) },
		omit:  func(h *header) bool { return !h.LeaseExpired }},
	{name: "lease", read: func(d *decoder, h *header) { readPtr(d, &h.Lease, leaseRecord) },
		write: func(b []byte, h *header) []byte { return leaseRecord.append(b, h.Lease) },
		omit:  func(h *header) bool { return h.Lease == nil }},
	{name: "lease_rev", num64: func(h *header) *int64 { return &h.LeaseRev }},
	{name: "last_from", read: readLastFrom, write: writeLastFrom,
		omit: func(h *header) bool { return len(h.LastFrom) == 0 }},
	{name: "log_pos", read: func(d *decoder, h *header) { posRecord.decode(d, &h.LogPos) },
		write: func(b []byte, h *header) []byte { return posRecord.append(b, &h.LogPos) }},
	{name: "last_event", read: func(d *decoder, h *header) { readPtr(d, &h.LastEvent, eventRecord) },
		write: func(b []byte, h *header) []byte { return eventRecord.append(b, h.LastEvent) },
		omit:  func(h *header) bool { return h.LastEvent == nil }},
	{name: "origin", read: func(d *decoder, h *header) { readPtr(d, &h.Origin, originRecord) },
		write: func(b []byte, h *header) []byte { return originRecord.append(b, h.Origin) },
		omit:  func(h *header) bool { return h.Origin == nil }},
}

var eventRecord = record[Event]{
	{name: "event_id", num64: func(e *Event) *int64 { return &e.EventID }},
	{name: "run_id", str: func(e *Event) *string { return &e.RunID }},
	{name: "task_id", str: func(e *Event) *string { return &e.TaskID }},
	{name: "thread_id", str: func(e *Event) *string { return &e.ThreadID }},
	{name: "source", str: func(e *Event) *string { return &e.Source }},
	{name: "event_type", str: func(e *Event) *string { return &e.EventType }},
	{name: "message_id", str: func(e *Event) *string { return &e.MessageID }},
	{name: "summary", str: func(e *Event) *string { return &e.Summary }},
	{name: "payload_json", raw: func(e *Event) *json.RawMessage { return &e.PayloadJSON }},
	{name: "created_at", str: func(e *Event) *string { return &e.CreatedAt }},
	{name: "agent", str: func(e *Event) *string { return &e.Agent }, omitEmpty: true},
	{name: "kind", str: func(e *Event) *string { return &e.Kind }, omitEmpty: true},
	{name: "status", str: func(e *Event) *string { return &e.Status }, omitEmpty: true},
	{name: "state", read: func(d *decoder, e *Event) { readPtr(d, &e.State, *headerRef) },
		write: func(b []byte, e *Event) []byte { return headerRef.append(b, e.State) },
		omit:  func(e *Event) bool { return e.State == nil }},
}

var headerRef *record[header]

func init() { headerRef = &headerRecord }

var msgFileRecord = record[msgFile]{
	{name: "message_id", str: func(m *msgFile) *string { return &m.MessageID }},
	{name: "thread_id", str: func(m *msgFile) *string { return &m.ThreadID }},
	{name: "seq", num: func(m *msgFile) *int { return &m.Seq }},
	{name: "from_agent", str: func(m *msgFile) *string { return &m.FromAgent }},
	{name: "to_agent", str: func(m *msgFile) *string { return &m.ToAgent }},
	{name: "kind", str: func(m *msgFile) *string { return &m.Kind }},
	{name: "summary", str: func(m *msgFile) *string { return &m.Summary }},
	{name: "body", str: func(m *msgFile) *string { return &m.Body }},
	{name: "payload_json", raw: func(m *msgFile) *json.RawMessage { return &m.PayloadJSON }},
	{name: "created_at", str: func(m *msgFile) *string { return &m.CreatedAt }},
	{name: "event_id", num64: func(m *msgFile) *int64 { return &m.EventID }},
	{name: "artifacts", read: func(d *decoder, m *msgFile) { readArtifacts(d, &m.Message) },
		write: func(b []byte, m *msgFile) []byte { return writeArtifacts(b, &m.Message) },
		omit:  func(m *msgFile) bool { return len(m.Artifacts) == 0 }},
	{name: "status", str: func(m *msgFile) *string { return &m.Status }, omitEmpty: true},
	{name: "damaged", read: func(d *decoder, m *msgFile) { d.bool(&m.Damaged) },
		write: func(b []byte, m *msgFile) []byte { return strconv.AppendBool(b, m.Damaged) },
		omit:  func(m *msgFile) bool { return !m.Damaged }},
	{name: "thread_header", read: func(d *decoder, m *msgFile) { readPtr(d, &m.InitialHeader, headerRecord) },
		write: func(b []byte, m *msgFile) []byte { return headerRecord.append(b, m.InitialHeader) },
		omit:  func(m *msgFile) bool { return m.InitialHeader == nil }},
	{name: "idempotency_key", str: func(m *msgFile) *string { return &m.IdempotencyKey }, omitEmpty: true},
	{name: "idempotency_command", str: func(m *msgFile) *string { return &m.IdempotencyCommand }, omitEmpty: true},
}

// readPtr reads a pointer to a record: null sets it to nil, an object
// decodes into what it points to (allocated if need be), as encoding/json
// does.
func readPtr[E any](d *decoder, pp **E, rec record[E]) {
	if d.null() {
		*pp = nil
		return
	}
	if *pp == nil {
		*pp = new(E)
	}
	rec.decode(d, *pp)
}

// readLastFrom reads the sender → seq map as encoding/json reads a map:
// null makes it nil, an object adds to it, each value starting from zero.
func readLastFrom(d *decoder, h *header) {
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
		v := 0
		d.int(&v)
		if d.err == nil {
			h.LastFrom[string(k)] = v
		}
	})
}

// writeLastFrom writes the map with its keys sorted, as encoding/json does.
func writeLastFrom(b []byte, h *header) []byte {
	keys := make([]string, 0, len(h.LastFrom))
	for k := range h.LastFrom {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = strconv.AppendInt(append(b, ':'), int64(h.LastFrom[k]), 10)
	}
	return append(b, '}')
}

// AppendJSON appends the thread as a JSON object, as encoding/json
// renders it.
func (t *Thread) AppendJSON(b []byte) []byte { return threadRecord.append(b, t) }

// AppendJSON appends the artifact as a JSON object.
func (a *Artifact) AppendJSON(b []byte) []byte { return artifactRecord.append(b, a) }

// AppendJSON appends the message as a JSON object, as encoding/json
// renders it.
func (m *Message) AppendJSON(b []byte) []byte { return messageRecord.append(b, m) }

// AppendJSON appends the lease as a JSON object, released_at null while
// it is not released (see Lease.MarshalJSON).
func (l *Lease) AppendJSON(b []byte) []byte { return leaseRecord.append(b, l) }

// AppendJSON appends the cursor as a JSON object.
func (c *Cursor) AppendJSON(b []byte) []byte { return cursorRecord.append(b, c) }

// AppendJSON appends the event as a JSON object (with its state, when
// set), as encoding/json renders it.
func (ev *Event) AppendJSON(b []byte) []byte { return eventRecord.append(b, ev) }

func (h *header) appendJSON(b []byte) []byte       { return headerRecord.append(b, h) }
func (m *msgFile) appendJSON(b []byte) []byte      { return msgFileRecord.append(b, m) }
func (r *idemRecord) appendJSON(b []byte) []byte   { return idemRecordFields.append(b, r) }
func (f *formatInfo) appendJSON(b []byte) []byte   { return formatRecord.append(b, f) }
func unmarshalHeader(data []byte, h *header) error { return headerRecord.unmarshal(data, h) }
func unmarshalMessage(data []byte, m *Message) error {
	return messageRecord.unmarshal(data, m)
}
func unmarshalMsgFile(data []byte, m *msgFile) error { return msgFileRecord.unmarshal(data, m) }
func unmarshalLease(data []byte, l *Lease) error     { return leaseRecord.unmarshal(data, l) }
func unmarshalEvent(data []byte, ev *Event) error    { return eventRecord.unmarshal(data, ev) }
func unmarshalCursor(data []byte, c *Cursor) error   { return cursorRecord.unmarshal(data, c) }
func unmarshalIdemRecord(data []byte, r *idemRecord) error {
	return idemRecordFields.unmarshal(data, r)
}

// formatRecord is inbox.json as written (see readFormat for reading).
var formatRecord = record[formatInfo]{
	{name: "format", str: func(f *formatInfo) *string { return &f.Format }},
	{name: "version", num: func(f *formatInfo) *int { return &f.Version }},
	{name: "shared", read: func(d *decoder, f *formatInfo) { d.bool(&f.Shared) },
		write: func(b []byte, f *formatInfo) []byte { return strconv.AppendBool(b, f.Shared) }},
	{name: "created_at", str: func(f *formatInfo) *string { return &f.CreatedAt }},
}

var blobMetaRecord = record[blobMeta]{
	{name: "blob", str: func(b *blobMeta) *string { return &b.Blob }},
	{name: "field", str: func(b *blobMeta) *string { return &b.Field }},
	{name: "sha256", str: func(b *blobMeta) *string { return &b.SHA256 }},
	{name: "bytes", num64: func(b *blobMeta) *int64 { return &b.Bytes }},
}

func unmarshalBlobMeta(data []byte, b *blobMeta) error { return blobMetaRecord.unmarshal(data, b) }
