package inbox

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Seed 002's line form of a message (SPEC §10): one JSON object per line,
//
//	{"type":…,"from":…,"to":…,"timestamp":…,"requestId":…,"ackId":…,"content":{…}}
//
// maps onto a message member for member:
//
//	type       ↔ type (an untyped message is written as "message")
//	from       ↔ from_agent
//	to         ↔ to_agent (as the sender gave it: "b", "a,b", "@team", "all")
//	timestamp  ↔ timestamp when the line gave its own, else created_at
//	content    ↔ payload_json (a message with an empty payload and a body
//	             is written with {"text": body})
//	requestId  ↔ request_id
//	ackId      ↔ ack_id
//	any other  ↔ extra (kept as given, written back as given)
//
// A line read in and written out again is the same JSON value.

// Seed002 is a message in seed 002's line form.
type Seed002 struct {
	Type      string
	From      string
	To        string
	Timestamp string
	Content   json.RawMessage
	RequestID string
	AckID     string
	// Extra holds the line's other members, as a JSON object (nil: none).
	Extra json.RawMessage
}

// seed002Known are the members Seed002 has fields for.
var seed002Known = []string{"type", "from", "to", "timestamp", "content", "requestId", "ackId"}

// ParseSeed002 reads one seed-002 line. type, from and to are required;
// content must be an object (absent: {}); a missing timestamp is left
// empty for the caller to fill in.
func ParseSeed002(line []byte) (*Seed002, error) {
	line = bytes.TrimSpace(line)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return nil, Invalid("seed002", "is not one JSON object: %v", err)
	}
	l := &Seed002{}
	str := func(name string, dst *string, required bool) error {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			if required {
				return Invalid("seed002", "has no %q member (a seed-002 line has type, from, to, timestamp and content)", name)
			}
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return Invalid("seed002", "member %q is not a string", name)
		}
		return nil
	}
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{{"type", &l.Type, true}, {"from", &l.From, true}, {"to", &l.To, true}, {"timestamp", &l.Timestamp, false},
		{"requestId", &l.RequestID, false}, {"ackId", &l.AckID, false}} {
		if err := str(f.name, f.dst, f.required); err != nil {
			return nil, err
		}
	}
	if err := ValidateType("seed002", l.Type); err != nil {
		return nil, err
	}
	l.Content = json.RawMessage("{}")
	if c, ok := raw["content"]; ok && string(c) != "null" {
		if !isObject(c) {
			return nil, Invalid("seed002", "member \"content\" must be a JSON object")
		}
		var b bytes.Buffer
		if err := json.Compact(&b, c); err != nil {
			return nil, Invalid("seed002", "member \"content\" is not valid JSON: %v", err)
		}
		l.Content = b.Bytes()
	}
	extra := map[string]json.RawMessage{}
	for k, v := range raw {
		if !slices.Contains(seed002Known, k) {
			extra[k] = v
		}
	}
	if len(extra) > 0 {
		b, err := json.Marshal(extra)
		if err != nil {
			return nil, Invalid("seed002", "%v", err)
		}
		l.Extra = b
	}
	return l, nil
}

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

// Seed002Of is m in seed 002's line form.
func Seed002Of(m *Message) *Seed002 {
	l := &Seed002{Type: m.Type, From: m.FromAgent, To: m.ToAgent, Timestamp: m.Timestamp, Content: m.PayloadJSON,
		RequestID: m.RequestID, AckID: m.AckID, Extra: m.Extra}
	if l.Type == "" {
		l.Type = TypeMessage
	}
	if l.Timestamp == "" {
		l.Timestamp = m.CreatedAt
	}
	if len(bytes.TrimSpace(l.Content)) == 0 || string(l.Content) == "{}" {
		l.Content = json.RawMessage("{}")
		if m.Body != "" {
			b, _ := json.Marshal(map[string]string{"text": m.Body})
			l.Content = b
		}
	}
	return l
}

// Line renders l as one line (without the newline): the known members in
// seed 002's order, then the extra ones in name order.
func (l *Seed002) Line() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	member := func(name string, v []byte) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	str := func(s string) []byte { v, _ := json.Marshal(s); return v }
	member("type", str(l.Type))
	member("from", str(l.From))
	member("to", str(l.To))
	member("timestamp", str(l.Timestamp))
	if l.RequestID != "" {
		member("requestId", str(l.RequestID))
	}
	if l.AckID != "" {
		member("ackId", str(l.AckID))
	}
	content := l.Content
	if len(content) == 0 {
		content = json.RawMessage("{}")
	}
	member("content", content)
	if len(l.Extra) > 0 {
		var extra map[string]json.RawMessage
		if json.Unmarshal(l.Extra, &extra) == nil {
			keys := make([]string, 0, len(extra))
			for k := range extra {
				if !slices.Contains(seed002Known, k) {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				member(k, extra[k])
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// SendContent is the line as the content of a send: its type, content
// (payload), request and ack ids, own timestamp and extra members; its
// body is the content's "text", its summary ContentSummary (else the
// type).
func (l *Seed002) SendContent() Content {
	c := Content{Type: l.Type, PayloadJSON: string(l.Content), RequestID: l.RequestID, AckID: l.AckID,
		AckRequired: l.AckID != "" && l.Type != TypeAcknowledgment, Timestamp: l.Timestamp, Extra: l.Extra}
	var fields map[string]any
	json.Unmarshal(l.Content, &fields)
	if t, ok := fields["text"].(string); ok {
		c.Body = t
	}
	if c.Summary = ContentSummary(l.Content); c.Summary == "" {
		c.Summary = l.Type
	}
	return c
}
