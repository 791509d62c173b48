package inbox

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/inbox-dev/inbox/internal/jsontext"
)

// Limits on what the store accepts. They keep every file and every event
// line bounded; see docs/FORMAT.md.
const (
	MaxNameLen     = 64        // agent names
	MaxIDLen       = 100       // thread, message, run and task ids
	MaxSubjectLen  = 1000      // bytes
	MaxSummaryLen  = 2000      // bytes
	MaxBodyLen     = MaxInline // bytes inline; a larger body becomes a blob
	MaxPayloadLen  = MaxInline // bytes inline; a larger payload becomes a blob
	MaxMetadataLen = 256 << 10 // an artifact's metadata
	MaxArtifacts   = 100
	MaxPathLen     = 4096
	MaxLeaseSecs   = 7 * 24 * 3600
	MaxIdemKeyLen  = 200
)

// MaxInline is the largest body, payload or task output stored inline in
// a message; anything larger is stored as a blob.
const MaxInline = 64 << 20

const timeLayout = "2006-01-02T15:04:05.000000Z"

// FormatTime renders t as fixed-width UTC RFC 3339 with microseconds, so
// that string order is time order.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// ParseTime parses a timestamp the store wrote (RFC 3339).
func ParseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

// ValidateAgent checks an agent name: 1–64 characters from letters, digits
// and . _ - : @ +, starting with a letter or digit. Agent names become file
// names in the store, so nothing else is allowed.
func ValidateAgent(field, name string) error {
	if name == "" {
		return Invalid(field, "is required (an agent name)")
	}
	if len(name) > MaxNameLen {
		return Invalid(field, "is %d bytes long; an agent name may have at most %d", len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !ok && i > 0 {
			ok = strings.IndexByte("._-:@+", c) >= 0
		}
		if !ok {
			return Invalid(field, "%q: agent names may contain only letters, digits and . _ - : @ + and must start with a letter or digit", name)
		}
	}
	if strings.Contains(name, "..") {
		return Invalid(field, "%q: agent names may not contain \"..\"", name)
	}
	return nil
}

// ValidateID checks a thread or message id given by a user: 1–100
// characters from letters, digits, _ and -. It keeps ids from ever naming
// a path outside the store ("/", "..", NUL and the like are refused).
func ValidateID(field, id string) error {
	if id == "" {
		return Invalid(field, "is required")
	}
	if len(id) > MaxIDLen {
		return Invalid(field, "is %d bytes long; an id may have at most %d", len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return Invalid(field, "%q: ids may contain only letters, digits, _ and -", id)
		}
	}
	return nil
}

// ValidateText checks free text: valid UTF-8, no NUL, at most max bytes.
func ValidateText(field, s string, max int) error {
	if len(s) > max {
		return Invalid(field, "is %d bytes long; the limit is %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return Invalid(field, "is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return Invalid(field, "contains a NUL byte")
	}
	return nil
}

// ValidateLabel checks a short single-line value such as a run or task id.
func ValidateLabel(field, s string) error {
	if err := ValidateText(field, s, MaxIDLen); err != nil {
		return err
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return Invalid(field, "contains a control character")
		}
	}
	return nil
}

// ValidateKind checks a message kind against the allowed set.
func ValidateKind(field, kind string, allowed []string) error {
	if !slices.Contains(allowed, kind) {
		return Invalid(field, "%q is not one of %s", kind, strings.Join(allowed, "|"))
	}
	return nil
}

// ValidateStatuses checks a list of statuses.
func ValidateStatuses(field string, statuses []string) error {
	for _, st := range statuses {
		if !slices.Contains(Statuses, st) {
			return Invalid(field, "%q is not one of %s", st, strings.Join(Statuses, ","))
		}
	}
	return nil
}

// ValidJSON checks that s is one JSON value and returns it compacted; an
// empty s gives def. The text must be valid UTF-8 and hold no lone
// surrogate escape (internal/jsontext): what the store keeps must read
// back unchanged in any JSON reader. A max of 0 means no size limit.
func ValidJSON(field, s string, def string, max int) (json.RawMessage, error) {
	if strings.Trim(s, " \t\r\n") == "" { // JSON whitespace only: absent
		return json.RawMessage(def), nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return nil, Invalid(field, "is not valid JSON: %v", err)
	}
	if max > 0 && b.Len() > max {
		return nil, Invalid(field, "is %d bytes long; the limit is %d", b.Len(), max)
	}
	// Compact checks the grammar, not the encoding: JSON text is UTF-8,
	// and a lone surrogate escape is not a character.
	if err := jsontext.Check(b.Bytes()); err != nil {
		return nil, Invalid(field, "is not valid JSON text: %v", err)
	}
	return json.RawMessage(b.Bytes()), nil
}

// ValidateIdemKey checks an idempotency key: text of at most MaxIdemKeyLen
// bytes.
func ValidateIdemKey(key string) error {
	return ValidateText("idempotency_key", key, MaxIdemKeyLen)
}
