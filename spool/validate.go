package spool

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsontext"
)

// maxEventSumLen is the length summaries are cut to in event lines.
const maxEventSumLen = 300

// ValidateAgent checks an agent name: 1–64 characters from letters, digits
// and . _ - : @ +, starting with a letter or digit. Agent names become file
// names in the store, so nothing else is allowed.
func ValidateAgent(field, name string) error {
	if name == "" {
		return invalidf(field, "--%s is required (an agent name)", field)
	}
	if len(name) > inbox.MaxNameLen {
		return invalidf(field, "--%s: agent name is %d bytes long; the limit is %d", field, len(name), inbox.MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !ok && i > 0 {
			ok = strings.IndexByte("._-:@+", c) >= 0
		}
		if !ok {
			return invalidf(field, "--%s %q: agent names may contain only letters, digits and . _ - : @ + and must start with a letter or digit", field, name)
		}
	}
	if strings.Contains(name, "..") {
		return invalidf(field, "--%s %q: agent names may not contain \"..\"", field, name)
	}
	return nil
}

// ValidateID checks a thread or message id given by a user: 1–100
// characters from letters, digits, _ and -. It keeps ids from ever naming
// a path outside the store ("/", "..", NUL and the like are refused).
func ValidateID(field, id string) error {
	if id == "" {
		return invalidf(field, "--%s is required", field)
	}
	if len(id) > inbox.MaxIDLen {
		return invalidf(field, "--%s: id is %d bytes long; the limit is %d", field, len(id), inbox.MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return invalidf(field, "--%s %q: ids may contain only letters, digits, _ and -", field, id)
		}
	}
	return nil
}

// validateText checks free text: valid UTF-8, no NUL, at most max bytes.
func validateText(field, s string, max int) error {
	if len(s) > max {
		return invalidf(field, "--%s is %d bytes long; the limit is %d", field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return invalidf(field, "--%s is not valid UTF-8", field)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalidf(field, "--%s contains a NUL byte", field)
	}
	return nil
}

// validateLabel checks a short single-line value such as a run or task id.
func validateLabel(field, s string) error {
	if err := validateText(field, s, inbox.MaxIDLen); err != nil {
		return err
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return invalidf(field, "--%s contains a control character", field)
		}
	}
	return nil
}

// ValidateKind checks a message kind against the allowed set.
func ValidateKind(field, kind string, allowed []string) error {
	if !slices.Contains(allowed, kind) {
		return invalidf(field, "--%s %q is not one of %s", field, kind, strings.Join(allowed, "|"))
	}
	return nil
}

// ValidateStatuses checks a list of statuses.
func ValidateStatuses(field string, statuses []string) error {
	for _, st := range statuses {
		if !slices.Contains(inbox.Statuses, st) {
			return invalidf(field, "--%s %q is not one of %s", field, st, strings.Join(inbox.Statuses, ","))
		}
	}
	return nil
}

// validJSON checks that s is one JSON value and returns it compacted; an
// empty s gives def. The text must be valid UTF-8 and hold no lone
// surrogate escape (internal/jsontext): what the store keeps must read
// back unchanged in any JSON reader. A max of 0 means no size limit.
func validJSON(field, s string, def string, max int) (json.RawMessage, error) {
	if strings.Trim(s, " \t\r\n") == "" { // JSON whitespace only: absent
		return json.RawMessage(def), nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return nil, invalidf(field, "--%s is not valid JSON: %v", field, err)
	}
	if max > 0 && b.Len() > max {
		return nil, invalidf(field, "--%s is %d bytes long; the limit is %d", field, b.Len(), max)
	}
	// Compact checks the grammar, not the encoding: JSON text is UTF-8,
	// and a lone surrogate escape is not a character.
	if err := jsontext.Check(b.Bytes()); err != nil {
		return nil, invalidf(field, "--%s is not valid JSON text: %v", field, err)
	}
	return json.RawMessage(b.Bytes()), nil
}
