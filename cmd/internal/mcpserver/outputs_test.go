package mcpserver

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools that never write, that may destroy what others rely on, and
// the writers a repeat of which changes nothing more.
var (
	readOnlyTools    = []string{"fetch", "list", "watch", "events", "mailbox", "agents", "team_show", "team_list", "search"}
	destructiveTools = []string{"cancel", "team_remove"}
	idempotentTools  = []string{"show", "queue", "team_add"}
)

// TestMCPOutputSchemasAndHints: tools/list gives every tool an output
// schema (an object with ok and command, each of the command's top-level
// keys described with its type) and annotations that tell a reader from
// a writer and a writer from a destroyer; no tool reaches beyond the
// store.
func TestMCPOutputSchemasAndHints(t *testing.T) {
	mt := newMCPTest(t, "", false)
	res, err := mt.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var readOnly, destructive, idempotent []string
	for _, tool := range res.Tools {
		s := schemaOf(t, tool)
		if s == nil {
			continue
		}
		if s.Type != "object" || !slices.Contains(s.Required, "ok") || !slices.Contains(s.Required, "command") {
			t.Errorf("%s: output schema type %q, required %v: want an object that requires ok and command", tool.Name, s.Type, s.Required)
		}
		for key, want := range map[string]string{"ok": "boolean", "command": "string", "error": "object"} {
			if p := s.Properties[key]; p == nil || p.Type != want && !slices.Contains(p.Types, want) {
				t.Errorf("%s: output property %s is %+v, want type %s", tool.Name, key, p, want)
			}
		}
		if len(s.Properties) < 4 {
			t.Errorf("%s: output schema describes only %v", tool.Name, slices.Sorted(maps.Keys(s.Properties)))
		}
		for k, p := range s.Properties {
			if p.Description == "" {
				t.Errorf("%s: output property %s has no description", tool.Name, k)
			}
		}
		a := tool.Annotations
		if a == nil {
			t.Errorf("%s has no annotations", tool.Name)
			continue
		}
		if a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s: openWorldHint %v, want false (it works on the store alone)", tool.Name, a.OpenWorldHint)
		}
		if a.ReadOnlyHint {
			readOnly = append(readOnly, tool.Name)
			continue
		}
		if a.DestructiveHint == nil || *a.DestructiveHint {
			destructive = append(destructive, tool.Name)
		}
		if a.IdempotentHint {
			idempotent = append(idempotent, tool.Name)
		}
	}
	for _, c := range []struct {
		hint      string
		got, want []string
	}{{"readOnlyHint", readOnly, readOnlyTools}, {"destructiveHint", destructive, destructiveTools},
		{"idempotentHint", idempotent, idempotentTools}} {
		slices.Sort(c.got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(c.got, want) {
			t.Errorf("%s on %v, want %v", c.hint, c.got, want)
		}
	}
	// The wait tools tell an agent how to go on after max_wait_seconds.
	for _, tool := range res.Tools {
		if tool.Name != "wait_reply" && tool.Name != "watch" {
			continue
		}
		if s := schemaOf(t, tool); s == nil {
			continue
		} else if p := s.Properties["next_event_id"]; p == nil || p.Type != "integer" {
			t.Errorf("%s: next_event_id is %+v, want an integer", tool.Name, p)
		}
	}
}

// schemaOf is tool's output schema as a client reads it.
func schemaOf(t *testing.T, tool *mcp.Tool) *jsonschema.Schema {
	t.Helper()
	if tool.OutputSchema == nil {
		t.Errorf("%s has no output schema", tool.Name)
		return nil
	}
	s, err := decodeSchema(tool.OutputSchema)
	if err != nil {
		t.Fatalf("%s: output schema: %v", tool.Name, err)
	}
	return s
}

// decodeSchema reads a schema as a client receives it.
func decodeSchema(v any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	return &s, json.Unmarshal(b, &s)
}

// outputChecks are the output schemas of a server's tools, read from
// tools/list once, for checking every result the tests get.
type outputChecks struct {
	once    sync.Once
	schemas map[string]*jsonschema.Schema
	err     error
}

// checkOutput fails the test unless out, name's structured result,
// validates against the output schema tools/list gives, and the schema
// describes each of its top-level keys (the schema lets unknown keys
// through, so that a client of an older schema keeps working; here a key
// it does not name is an error).
func (mt *mcpTest) checkOutput(name string, out map[string]any) {
	mt.t.Helper()
	c := &mt.outputs
	c.once.Do(func() {
		res, err := mt.cs.ListTools(context.Background(), nil)
		if err != nil {
			c.err = err
			return
		}
		c.schemas = map[string]*jsonschema.Schema{}
		for _, tool := range res.Tools {
			if tool.OutputSchema == nil {
				continue
			}
			if c.schemas[tool.Name], c.err = decodeSchema(tool.OutputSchema); c.err != nil {
				return
			}
		}
	})
	if c.err != nil {
		mt.t.Fatalf("tools/list: %v", c.err)
	}
	s := c.schemas[name]
	if s == nil {
		mt.t.Errorf("%s has no output schema", name)
		return
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		mt.t.Fatalf("%s: output schema: %v", name, err)
	}
	if err := rs.Validate(out); err != nil {
		b, _ := json.Marshal(out)
		mt.t.Errorf("%s: result %.600s does not validate against its output schema: %v", name, b, err)
	}
	for k := range out {
		if s.Properties[k] == nil {
			mt.t.Errorf("%s: result key %q is not in the output schema (%v)", name, k, slices.Sorted(maps.Keys(s.Properties)))
		}
	}
}

// TestMCPOutputWarningsAndCuts: the keys a result carries only sometimes
// are in its schema too: a claim's warnings (the thread was another's),
// fetch's (an agent never seen), show's bodies_cut, receive's
// task_finished (nothing more will come from a finished task).
func TestMCPOutputWarningsAndCuts(t *testing.T) {
	mt := newMCPTest(t, "w2", false)
	if f := mt.ok("fetch", map[string]any{"agent": "nobody"}); f["warnings"] == nil {
		t.Errorf("fetch for an agent never seen: no warning: %v", f)
	}
	mt.ok("push", map[string]any{"name": "job", "prompt": "p"})
	mt.ok("cancel", map[string]any{"name": "job", "reason": "not needed"})
	mt.ok("receive", map[string]any{"from": "job", "max_wait_seconds": 5})
	if r := mt.ok("receive", map[string]any{"from": "job", "max_wait_seconds": 5}); r["task_finished"] != true {
		t.Errorf("receive from a finished task: %v", r)
	}
	sent := mt.ok("send", map[string]any{"from": "lead", "to": "w1", "subject": "for w1", "body": "a long body"})
	tid := get(sent, "thread.thread_id")
	if c := mt.ok("claim", map[string]any{"thread": tid}); c["warnings"] == nil {
		t.Errorf("claim of w1's thread by w2: no warning: %v", c)
	}
	s := mt.ok("show", map[string]any{"thread": tid, "max_body_bytes": 3})
	if get(s, "bodies_cut.0.message_id") != get(sent, "message.message_id") || get(s, "messages.0.body") != "a l" {
		t.Errorf("show with max_body_bytes 3: %v", s)
	}
}
