// Package intake parses and validates file-drop task descriptors
// (NAME.task.json, SPEC §6): the JSON a cron job, CI hook or another agent
// drops into the intake directory for the daemon to turn into a thread.
// It only reads bytes and reports what they say; it never touches the
// file system or the store.
//
// # Guarantees
//
// Parse accepts exactly the documented schema: version 1 (the number, not
// a string); kind prompt, send or spawn_worker; each kind's fields with
// their types; no unknown fields; no member given twice in one object, at
// any depth; no empty strings (omit a field instead); at most MaxSize
// bytes. Every refusal names the field and the rule, e.g.
// `field "agent_type": "wizard" is not one of general-purpose|explorer|…`.
package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/inbox-dev/inbox/internal/jsontext"
)

// MaxSize is the largest descriptor accepted, in bytes.
const MaxSize = 64 << 10

// Suffix is the file-name suffix of descriptors; other names are ignored.
const Suffix = ".task.json"

// Descriptor kinds.
const (
	KindPrompt      = "prompt"
	KindSend        = "send"
	KindSpawnWorker = "spawn_worker"
)

// MessageKinds are the message_kind values a send descriptor may name
// (the message kinds of SPEC §3).
var MessageKinds = []string{"task", "progress", "question", "answer", "result", "control", "event"}

// AgentTypes are the agent_type values a spawn_worker descriptor may name.
var AgentTypes = []string{"general-purpose", "explorer", "coder", "reviewer", "tester", "custom", "coordinator", "researcher"}

// Artifact is a file reference in a send descriptor.
type Artifact struct {
	Path     string          `json:"path"`
	Kind     string          `json:"kind,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Descriptor is a parsed, valid descriptor. Fields a kind does not use
// are empty.
type Descriptor struct {
	Kind      string
	CreatedAt string

	// prompt and spawn_worker
	Prompt string

	// prompt and send
	From, To, Subject, Priority, TaskID string

	// send
	Thread, RunID, MessageKind, Summary, Body string
	Payload                                   json.RawMessage
	Artifacts                                 []Artifact

	// spawn_worker
	AgentType, Name, Skill, Role, Model, Cwd string
	Skills                                   []string
}

// Error is a refusal: what is wrong and where.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func errf(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// ErrSyntax marks a descriptor that is not well-formed JSON; a file still
// being written looks like this, so the daemon may retry it once it is
// older.
var ErrSyntax = errors.New("malformed JSON")

// fields lists the members each kind accepts (besides version and kind).
var fields = map[string][]string{
	KindPrompt: {"prompt", "from", "to", "subject", "priority", "task_id", "createdAt"},
	KindSend: {"from", "to", "subject", "thread", "run_id", "task_id", "message_kind", "summary", "body",
		"payload", "priority", "artifacts", "createdAt"},
	KindSpawnWorker: {"agent_type", "name", "prompt", "task_id", "skill", "role", "skills", "model", "cwd", "createdAt"},
}

// Parse validates a descriptor.
func Parse(data []byte) (*Descriptor, error) {
	if len(data) > MaxSize {
		return nil, errf("descriptor is %d bytes; the limit is %d", len(data), MaxSize)
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("%w at byte %d: %v", ErrSyntax, se.Offset, se)
		case errors.As(err, &te):
			return nil, errf("a descriptor must be a JSON object, not %s", te.Value)
		case errors.Is(err, io.EOF) || len(bytes.TrimSpace(data)) == 0:
			return nil, fmt.Errorf("%w: the file is empty", ErrSyntax)
		}
		return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if top == nil {
		return nil, errf("a descriptor must be a JSON object, not null")
	}
	// Only JSON's own whitespace may follow (not \v, \f or NBSP).
	if rest := bytes.Trim(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("%w: more than one JSON value in the file (%q follows the object)", ErrSyntax, cut(rest, 20))
	}
	// A member given twice would be read as its last value, silently:
	// refused, at any depth, naming where.
	if err := checkDuplicates(data); err != nil {
		return nil, err
	}
	if raw, ok := top["version"]; !ok {
		return nil, errf(`field "version": required (use 1)`)
	} else if v := bytes.TrimSpace(raw); len(v) > 0 && v[0] == '"' {
		return nil, errf(`field "version": want the number 1, not a string (%s)`, cut(v, 40))
	} else if string(v) != "1" {
		return nil, errf(`field "version": %s is not supported (use 1)`, cut(v, 40))
	}
	p := parser{top: top}
	kind := p.str("kind", true)
	if p.err != nil {
		return nil, p.err
	}
	allowed, ok := fields[kind]
	if !ok {
		return nil, errf(`field "kind": %q is not one of prompt|send|spawn_worker`, kind)
	}
	names := make([]string, 0, len(top))
	for name := range top {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name != "version" && name != "kind" && !slices.Contains(allowed, name) {
			return nil, errf(`unknown field %q for kind %s (allowed: %s)`, name, kind, strings.Join(allowed, ", "))
		}
	}
	// The store's rule for JSON text, the CLI's too: valid UTF-8 and no
	// lone surrogates (encoding/json would silently replace them).
	for _, name := range names {
		if err := jsontext.Check(top[name]); err != nil {
			return nil, errf(`field %q: %v`, name, err)
		}
	}
	d := &Descriptor{Kind: kind, CreatedAt: p.str("createdAt", false)}
	switch kind {
	case KindPrompt:
		d.Prompt = p.text("prompt", true)
		d.From, d.To, d.Subject = p.str("from", false), p.str("to", false), p.str("subject", false)
		d.Priority, d.TaskID = p.str("priority", false), p.str("task_id", false)
	case KindSend:
		d.From, d.To, d.Subject = p.str("from", false), p.str("to", false), p.str("subject", false)
		d.Thread, d.RunID, d.TaskID = p.str("thread", false), p.str("run_id", false), p.str("task_id", false)
		d.MessageKind, d.Summary, d.Body = p.str("message_kind", false), p.str("summary", false), p.str("body", false)
		d.Priority = p.str("priority", false)
		if p.err == nil && d.MessageKind != "" && !slices.Contains(MessageKinds, d.MessageKind) {
			p.fail(`field "message_kind": %q is not one of %s`, d.MessageKind, strings.Join(MessageKinds, "|"))
		}
		d.Payload = p.raw("payload")
		d.Artifacts = p.artifacts()
		if p.err == nil && d.Thread == "" {
			switch {
			case d.To == "":
				p.fail(`field "to": required when "thread" is not given`)
			case d.Subject == "":
				p.fail(`field "subject": required when "thread" is not given`)
			}
		}
		if p.err == nil && d.Summary == "" && d.Body == "" && d.Subject == "" && len(d.Payload) == 0 && len(d.Artifacts) == 0 {
			p.fail(`the message is empty: give "summary", "body", "payload" or "artifacts"`)
		}
	case KindSpawnWorker:
		d.AgentType = p.str("agent_type", true)
		if p.err == nil && !slices.Contains(AgentTypes, d.AgentType) {
			p.fail(`field "agent_type": %q is not one of %s`, d.AgentType, strings.Join(AgentTypes, "|"))
		}
		d.Name, d.Prompt = p.str("name", true), p.text("prompt", true)
		d.TaskID, d.Skill, d.Role = p.str("task_id", false), p.str("skill", false), p.str("role", false)
		d.Model, d.Cwd = p.str("model", false), p.str("cwd", false)
		d.Skills = p.strings("skills")
	}
	if p.err == nil && d.Priority != "" && !slices.Contains([]string{"low", "normal", "high"}, d.Priority) {
		p.fail(`field "priority": %q is not one of low|normal|high`, d.Priority)
	}
	if p.err != nil {
		return nil, p.err
	}
	return d, nil
}

// checkDuplicates refuses a descriptor (well-formed JSON) in which one
// object, at any depth, names a member twice: at the top level
// `field "prompt": given twice …`, deeper `field "payload.b": key "c"
// given twice …`.
func checkDuplicates(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walkDuplicates(dec, "")
}

// walkDuplicates reads one value from dec; path names it ("" for the
// descriptor itself).
func walkDuplicates(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%w: %v", ErrSyntax, err)
			}
			k, _ := kt.(string)
			if seen[k] {
				if path == "" {
					return errf("field %q: given twice (duplicate keys are refused: give each field once)", k)
				}
				return errf("field %q: key %q given twice (duplicate keys are refused: give each key once)", path, k)
			}
			seen[k] = true
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			if err := walkDuplicates(dec, sub); err != nil {
				return err
			}
		}
		_, err = dec.Token() // }
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkDuplicates(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ]
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	return nil
}

// parser reads typed members of a JSON object, keeping the first error.
type parser struct {
	top map[string]json.RawMessage
	err error
}

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = errf(format, args...)
	}
}

func (p *parser) str(name string, required bool) string {
	raw, ok := p.top[name]
	if !ok {
		if required {
			p.fail("field %q: required", name)
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.fail("field %q: want a string, got %s", name, kindOf(raw))
		return ""
	}
	if s == "" {
		p.fail("field %q: empty strings are refused (omit the field instead)", name)
	}
	return s
}

// text is str for text that becomes a message's body: no NUL byte, the
// rule the store applies to every text it keeps.
func (p *parser) text(name string, required bool) string {
	s := p.str(name, required)
	if strings.IndexByte(s, 0) >= 0 {
		p.fail("field %q: contains a NUL byte", name)
	}
	return s
}

func (p *parser) raw(name string) json.RawMessage {
	raw, ok := p.top[name]
	if !ok {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		p.fail("field %q: %v", name, err)
		return nil
	}
	return b.Bytes()
}

func (p *parser) strings(name string) []string {
	raw, ok := p.top[name]
	if !ok {
		return nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		p.fail("field %q: want an array of strings, got %s", name, kindOf(raw))
		return nil
	}
	for i, s := range ss {
		if s == "" {
			p.fail("field %q[%d]: empty strings are refused", name, i)
		}
	}
	return ss
}

func (p *parser) artifacts() []Artifact {
	raw, ok := p.top["artifacts"]
	if !ok {
		return nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.fail(`field "artifacts": want an array of objects, got %s`, kindOf(raw))
		return nil
	}
	var out []Artifact
	for i, item := range items {
		q := parser{top: item}
		where := fmt.Sprintf("artifacts[%d]", i)
		for k := range item {
			if k != "path" && k != "kind" && k != "metadata" {
				p.fail("unknown field %q in %s (allowed: path, kind, metadata)", k, where)
				return nil
			}
		}
		a := Artifact{Path: q.str("path", true), Kind: q.str("kind", false), Metadata: q.raw("metadata")}
		if q.err != nil {
			p.fail("%s: %v", where, q.err)
			return nil
		}
		if len(a.Metadata) > 0 && a.Metadata[0] != '{' {
			p.fail(`%s: field "metadata": want an object`, where)
			return nil
		}
		out = append(out, a)
	}
	return out
}

func cut(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func kindOf(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
