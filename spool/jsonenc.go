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
// cursors) are encoded and decoded by hand-written code in this file and
// jsondec.go rather than by encoding/json's reflection. Every command is
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

// AppendJSON appends the thread as a JSON object, as encoding/json
// renders it.
func (t *Thread) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = t.appendFields(b)
	return append(b, '}')
}

func (t *Thread) appendFields(b []byte) []byte {
	b = appendStrField(b, "thread_id", t.ThreadID)
	b = appendStrField(b, "run_id", t.RunID)
	b = appendStrField(b, "task_id", t.TaskID)
	b = appendStrField(b, "subject", t.Subject)
	b = appendStrField(b, "created_by", t.CreatedBy)
	b = appendStrField(b, "assigned_to", t.AssignedTo)
	b = appendStrField(b, "status", t.Status)
	b = appendStrField(b, "priority", t.Priority)
	b = appendStrField(b, "latest_message_id", t.LatestMessageID)
	b = appendStrField(b, "created_at", t.CreatedAt)
	b = appendStrField(b, "updated_at", t.UpdatedAt)
	b = appendIntField(b, "message_count", int64(t.MessageCount))
	return appendIntField(b, "last_event_id", t.LastEventID)
}

// AppendJSON appends the artifact as a JSON object.
func (a *Artifact) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendStrField(b, "artifact_id", a.ArtifactID)
	b = appendStrField(b, "message_id", a.MessageID)
	b = appendStrField(b, "path", a.Path)
	b = appendStrField(b, "kind", a.Kind)
	b = appendRaw(appendKey(b, "metadata_json"), a.MetadataJSON)
	b = appendStrField(b, "created_at", a.CreatedAt)
	return append(b, '}')
}

// AppendJSON appends the message as a JSON object, as encoding/json
// renders it.
func (m *Message) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = m.appendFields(b)
	return append(b, '}')
}

func (m *Message) appendFields(b []byte) []byte {
	b = appendStrField(b, "message_id", m.MessageID)
	b = appendStrField(b, "thread_id", m.ThreadID)
	b = appendIntField(b, "seq", int64(m.Seq))
	b = appendStrField(b, "from_agent", m.FromAgent)
	b = appendStrField(b, "to_agent", m.ToAgent)
	b = appendStrField(b, "kind", m.Kind)
	b = appendStrField(b, "summary", m.Summary)
	b = appendStrField(b, "body", m.Body)
	b = appendRaw(appendKey(b, "payload_json"), m.PayloadJSON)
	b = appendStrField(b, "created_at", m.CreatedAt)
	b = appendIntField(b, "event_id", m.EventID)
	if len(m.Artifacts) > 0 {
		b = append(appendKey(b, "artifacts"), '[')
		for i := range m.Artifacts {
			if i > 0 {
				b = append(b, ',')
			}
			b = m.Artifacts[i].AppendJSON(b)
		}
		b = append(b, ']')
	}
	if m.Status != "" {
		b = appendStrField(b, "status", m.Status)
	}
	return b
}

// AppendJSON appends the lease as a JSON object, released_at null while
// it is not released (see Lease.MarshalJSON).
func (l *Lease) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendStrField(b, "thread_id", l.ThreadID)
	b = appendStrField(b, "agent_id", l.AgentID)
	b = appendIntField(b, "lease_token", l.LeaseToken)
	b = appendStrField(b, "claimed_at", l.ClaimedAt)
	b = appendStrField(b, "expires_at", l.ExpiresAt)
	if l.Rev != 0 {
		b = appendIntField(b, "rev", l.Rev)
	}
	if l.ReleasedAt == "" {
		b = append(appendKey(b, "released_at"), "null"...)
	} else {
		b = appendStrField(b, "released_at", l.ReleasedAt)
	}
	return append(b, '}')
}

// AppendJSON appends the cursor as a JSON object.
func (c *Cursor) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendStrField(b, "thread_id", c.ThreadID)
	b = appendStrField(b, "agent_id", c.AgentID)
	b = appendStrField(b, "last_read_message_id", c.LastReadMessageID)
	b = appendIntField(b, "last_read_seq", int64(c.LastReadSeq))
	b = appendStrField(b, "read_at", c.ReadAt)
	return append(b, '}')
}

// AppendJSON appends the event as a JSON object (with its state, when
// set), as encoding/json renders it.
func (ev *Event) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendIntField(b, "event_id", ev.EventID)
	b = appendStrField(b, "run_id", ev.RunID)
	b = appendStrField(b, "task_id", ev.TaskID)
	b = appendStrField(b, "thread_id", ev.ThreadID)
	b = appendStrField(b, "source", ev.Source)
	b = appendStrField(b, "event_type", ev.EventType)
	b = appendStrField(b, "message_id", ev.MessageID)
	b = appendStrField(b, "summary", ev.Summary)
	b = appendRaw(appendKey(b, "payload_json"), ev.PayloadJSON)
	b = appendStrField(b, "created_at", ev.CreatedAt)
	if ev.Agent != "" {
		b = appendStrField(b, "agent", ev.Agent)
	}
	if ev.Kind != "" {
		b = appendStrField(b, "kind", ev.Kind)
	}
	if ev.Status != "" {
		b = appendStrField(b, "status", ev.Status)
	}
	if ev.State != nil {
		b = ev.State.appendJSON(appendKey(b, "state"))
	}
	return append(b, '}')
}

func (h *header) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = h.Thread.appendFields(b)
	if h.Lease != nil {
		b = h.Lease.AppendJSON(appendKey(b, "lease"))
	}
	b = appendIntField(b, "lease_rev", h.LeaseRev)
	if len(h.LastFrom) > 0 {
		keys := make([]string, 0, len(h.LastFrom))
		for k := range h.LastFrom {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(appendKey(b, "last_from"), '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = strconv.AppendInt(append(b, ':'), int64(h.LastFrom[k]), 10)
		}
		b = append(b, '}')
	}
	b = append(appendKey(b, "log_pos"), '{')
	b = appendIntField(b, "segment", h.LogPos.Segment)
	b = appendIntField(b, "offset", h.LogPos.Offset)
	b = append(b, '}')
	if h.LastEvent != nil {
		b = h.LastEvent.AppendJSON(appendKey(b, "last_event"))
	}
	if h.Origin != nil {
		b = append(appendKey(b, "origin"), '{')
		b = appendStrField(b, "descriptor", h.Origin.Descriptor)
		b = appendStrField(b, "sha256", h.Origin.SHA256)
		b = append(b, '}')
	}
	return append(b, '}')
}

func (m *msgFile) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = m.Message.appendFields(b)
	if m.InitialHeader != nil {
		b = m.InitialHeader.appendJSON(appendKey(b, "thread_header"))
	}
	if m.IdempotencyKey != "" {
		b = appendStrField(b, "idempotency_key", m.IdempotencyKey)
	}
	if m.IdempotencyCommand != "" {
		b = appendStrField(b, "idempotency_command", m.IdempotencyCommand)
	}
	return append(b, '}')
}

func (r *idemRecord) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendStrField(b, "key", r.Key)
	b = appendStrField(b, "command", r.Command)
	b = appendStrField(b, "thread_id", r.ThreadID)
	b = appendStrField(b, "message_id", r.MessageID)
	b = appendIntField(b, "seq", int64(r.Seq))
	b = appendStrField(b, "created_at", r.CreatedAt)
	return append(b, '}')
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
