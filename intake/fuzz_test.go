package intake_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/intake"
)

// FuzzParseDescriptor feeds arbitrary bytes to intake.Parse (SPEC §6).
//
// Properties:
//   - Parse never panics;
//   - input over intake.MaxSize is refused; a valid descriptor padded with
//     JSON whitespace to exactly MaxSize is still accepted (unchanged), and
//     padded to MaxSize+1 is refused;
//   - a refusal is an *intake.Error or wraps intake.ErrSyntax, and its message
//     names a field or says what is malformed;
//   - an accepted input is well-formed JSON (json.Valid);
//   - an accepted descriptor is one of the three kinds, has every field its
//     kind requires, no field its kind does not use, only allowed enum
//     values and no empty strings;
//   - re-encoding an accepted descriptor's fields and parsing the result
//     gives the same descriptor (nothing is lost or invented by Parse).
//
// Seeds live in testdata/fuzz/FuzzParseDescriptor; `go test` replays them.
func FuzzParseDescriptor(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"kind":"prompt","prompt":"Summarise today changes"}`,
		`{"version":1,"kind":"prompt","prompt":"your prompt text","createdAt":"2026-05-30T12:34:56.000Z"}`,
		`{"version":1,"kind":"spawn_worker","agent_type":"general-purpose","name":"fix-issue-xyz","prompt":"Fix the broken X by editing src/foo.ts","task_id":"T-1"}`,
		`{"version":1,"kind":"send","from":"ci","to":"X","subject":"s","payload":{"a":[1,2,{"b":null}]},"artifacts":[{"path":"/tmp/l","metadata":{"n":1}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := intake.Parse(data)
		if len(data) > intake.MaxSize {
			if err == nil {
				t.Fatalf("accepted a descriptor of %d bytes (limit %d)", len(data), intake.MaxSize)
			}
			if !strings.Contains(err.Error(), "limit") {
				t.Fatalf("oversize refusal does not say so: %v", err)
			}
			return
		}
		if err != nil {
			if d != nil {
				t.Fatalf("Parse returned both a descriptor and an error: %+v, %v", d, err)
			}
			checkRefusal(t, data, err)
			return
		}
		if d == nil {
			t.Fatal("Parse returned neither a descriptor nor an error")
		}
		// Malformed JSON is refused (SPEC §6): whatever Parse accepts is one
		// well-formed JSON value.
		if !json.Valid(data) {
			t.Fatalf("accepted malformed JSON: %q -> %+v", data, d)
		}
		checkDescriptor(t, d)

		// Re-encode and parse again: the same descriptor. (Re-encoding may
		// legitimately grow a descriptor near the limit, e.g. invalid UTF-8
		// becomes \ufffd; such a one is not re-parsed.)
		if enc := encodeDescriptor(t, d); len(enc) <= intake.MaxSize {
			again, err := intake.Parse(enc)
			if err != nil {
				t.Fatalf("re-encoded descriptor refused: %v\nfirst parse: %.2000s\nre-encoded: %.2000s", err, fmt.Sprintf("%+v", d), enc)
			}
			if !reflect.DeepEqual(d, again) {
				t.Fatalf("re-encode round trip changed the descriptor:\n first %.2000s\nsecond %.2000s", fmt.Sprintf("%+v", d), fmt.Sprintf("%+v", again))
			}
		}

		// The size limit is on bytes, whitespace included, and inclusive.
		padded := make([]byte, intake.MaxSize+1)
		copy(padded, data)
		for i := len(data); i < len(padded); i++ {
			padded[i] = "\n \t\r"[i%4]
		}
		if same, err := intake.Parse(padded[:intake.MaxSize]); err != nil || !reflect.DeepEqual(d, same) {
			t.Fatalf("descriptor padded to exactly MaxSize: %.2000s, %v; want %.2000s", fmt.Sprintf("%+v", same), err, fmt.Sprintf("%+v", d))
		}
		if _, err := intake.Parse(padded); err == nil {
			t.Fatalf("descriptor padded to MaxSize+1 bytes accepted")
		}
	})
}

// knownFields are all member names any kind accepts.
var knownFields = []string{"version", "kind", "prompt", "from", "to", "subject", "priority", "task_id", "createdAt",
	"thread", "run_id", "message_kind", "summary", "body", "payload", "artifacts",
	"agent_type", "name", "skill", "role", "skills", "model", "cwd", "path", "metadata"}

func checkRefusal(t *testing.T, data []byte, err error) {
	t.Helper()
	msg := err.Error()
	if msg == "" {
		t.Fatalf("empty error message for %q", data)
	}
	if errors.Is(err, intake.ErrSyntax) {
		if !strings.Contains(msg, "malformed JSON") {
			t.Fatalf("syntax refusal does not say the JSON is malformed: %q", msg)
		}
		return
	}
	var ie *intake.Error
	if !errors.As(err, &ie) {
		t.Fatalf("refusal is neither *intake.Error nor ErrSyntax: %T %v", err, err)
	}
	switch {
	case strings.Contains(msg, "must be a JSON object"),
		strings.Contains(msg, "the message is empty"):
		return
	case strings.HasPrefix(msg, "unknown field "):
		return
	case strings.Contains(msg, "given twice (duplicate keys are refused"):
		// Names the member given twice, or the object holding it by its
		// path (payload.b, artifacts[1]), which the schema may not know.
		return
	case strings.Contains(msg, `field "`):
		// The named field must be one the schema knows (a refusal about a
		// field never names a field out of thin air).
		i := strings.Index(msg, `field "`) + len(`field "`)
		j := strings.IndexByte(msg[i:], '"')
		if j < 0 {
			t.Fatalf("refusal names an unterminated field: %q", msg)
		}
		if name := msg[i : i+j]; !slices.Contains(knownFields, name) {
			t.Fatalf("refusal names field %q, which the schema does not have: %q", name, msg)
		}
		return
	}
	t.Fatalf("refusal names no field and says nothing is malformed: %q (input %q)", msg, data)
}

func checkDescriptor(t *testing.T, d *intake.Descriptor) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("accepted descriptor %.2000s: "+format, append([]any{fmt.Sprintf("%+v", d)}, args...)...)
	}
	unused := func(names string, vals ...string) {
		t.Helper()
		for i, v := range vals {
			if v != "" {
				fail("kind %s carries field %s", d.Kind, strings.Split(names, ",")[i])
			}
		}
	}
	if d.Priority != "" && !slices.Contains([]string{"low", "normal", "high"}, d.Priority) {
		fail("priority %q", d.Priority)
	}
	switch d.Kind {
	case intake.KindPrompt:
		if d.Prompt == "" {
			fail("prompt without prompt")
		}
		unused("thread,run_id,message_kind,summary,body,agent_type,name,skill,role,model,cwd",
			d.Thread, d.RunID, d.MessageKind, d.Summary, d.Body, d.AgentType, d.Name, d.Skill, d.Role, d.Model, d.Cwd)
		if d.Payload != nil || d.Artifacts != nil || d.Skills != nil {
			fail("prompt carries payload, artifacts or skills")
		}
	case intake.KindSend:
		if d.Thread == "" && (d.To == "" || d.Subject == "") {
			fail("a new-thread send without to or subject")
		}
		if d.Summary == "" && d.Body == "" && d.Subject == "" && len(d.Payload) == 0 && len(d.Artifacts) == 0 {
			fail("an empty message")
		}
		if d.MessageKind != "" && !slices.Contains(intake.MessageKinds, d.MessageKind) {
			fail("message_kind %q", d.MessageKind)
		}
		if d.Payload != nil && !json.Valid(d.Payload) {
			fail("payload is not valid JSON: %q", d.Payload)
		}
		for i, a := range d.Artifacts {
			if a.Path == "" {
				fail("artifacts[%d] without path", i)
			}
			if a.Metadata != nil && (!json.Valid(a.Metadata) || a.Metadata[0] != '{') {
				fail("artifacts[%d].metadata is not a JSON object: %q", i, a.Metadata)
			}
		}
		unused("prompt,agent_type,name,skill,role,model,cwd", d.Prompt, d.AgentType, d.Name, d.Skill, d.Role, d.Model, d.Cwd)
		if d.Skills != nil {
			fail("send carries skills")
		}
	case intake.KindSpawnWorker:
		if !slices.Contains(intake.AgentTypes, d.AgentType) {
			fail("agent_type %q", d.AgentType)
		}
		if d.Name == "" || d.Prompt == "" {
			fail("spawn_worker without name or prompt")
		}
		for i, s := range d.Skills {
			if s == "" {
				fail("skills[%d] is empty", i)
			}
		}
		unused("from,to,subject,priority,thread,run_id,message_kind,summary,body",
			d.From, d.To, d.Subject, d.Priority, d.Thread, d.RunID, d.MessageKind, d.Summary, d.Body)
		if d.Payload != nil || d.Artifacts != nil {
			fail("spawn_worker carries payload or artifacts")
		}
	default:
		fail("unknown kind %q", d.Kind)
	}
}

// encodeDescriptor writes d back as a descriptor file, omitting empty
// fields. HTML escaping is off so that raw payloads keep their bytes.
func encodeDescriptor(t *testing.T, d *intake.Descriptor) []byte {
	t.Helper()
	m := map[string]any{"version": 1, "kind": d.Kind}
	put := func(name, v string) {
		if v != "" {
			m[name] = v
		}
	}
	put("createdAt", d.CreatedAt)
	put("prompt", d.Prompt)
	put("from", d.From)
	put("to", d.To)
	put("subject", d.Subject)
	put("priority", d.Priority)
	put("task_id", d.TaskID)
	put("thread", d.Thread)
	put("run_id", d.RunID)
	put("message_kind", d.MessageKind)
	put("summary", d.Summary)
	put("body", d.Body)
	put("agent_type", d.AgentType)
	put("name", d.Name)
	put("skill", d.Skill)
	put("role", d.Role)
	put("model", d.Model)
	put("cwd", d.Cwd)
	if d.Payload != nil {
		m["payload"] = d.Payload
	}
	if d.Artifacts != nil {
		var arts []map[string]any
		for _, a := range d.Artifacts {
			am := map[string]any{"path": a.Path}
			if a.Kind != "" {
				am["kind"] = a.Kind
			}
			if a.Metadata != nil {
				am["metadata"] = a.Metadata
			}
			arts = append(arts, am)
		}
		m["artifacts"] = arts
	}
	if d.Skills != nil {
		m["skills"] = d.Skills
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatalf("re-encode %+v: %v", d, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
