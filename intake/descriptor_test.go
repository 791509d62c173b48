package intake_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/intake"
)

func TestParseAccepts(t *testing.T) {
	cases := []struct {
		name, json string
		check      func(*intake.Descriptor) bool
	}{
		{"prompt", `{"version":1,"kind":"prompt","prompt":"Summarise today","createdAt":"2026-05-30T12:34:56.000Z"}`,
			func(d *intake.Descriptor) bool { return d.Kind == "prompt" && d.Prompt == "Summarise today" }},
		{"prompt with options", `{"version":1,"kind":"prompt","prompt":"p","from":"cron","to":"ops","subject":"s","priority":"high","task_id":"T1"}`,
			func(d *intake.Descriptor) bool {
				return d.From == "cron" && d.To == "ops" && d.Priority == "high" && d.TaskID == "T1"
			}},
		{"send", `{"version":1,"kind":"send","from":"ci","to":"X","subject":"build failed","body":"see log","payload":{"run":42},"artifacts":[{"path":"/tmp/log","kind":"log","metadata":{"lines":3}}]}`,
			func(d *intake.Descriptor) bool {
				return d.To == "X" && string(d.Payload) == `{"run":42}` && len(d.Artifacts) == 1 && d.Artifacts[0].Kind == "log"
			}},
		{"same key in different objects", `{"version":1,"kind":"send","to":"X","subject":"s","payload":{"a":{"a":1},"b":[{"a":1},{"a":2}]}}`,
			func(d *intake.Descriptor) bool { return string(d.Payload) == `{"a":{"a":1},"b":[{"a":1},{"a":2}]}` }},
		{"send to a thread", `{"version":1,"kind":"send","thread":"thr_1","body":"more"}`,
			func(d *intake.Descriptor) bool { return d.Thread == "thr_1" }},
		{"spawn_worker", `{"version":1,"kind":"spawn_worker","agent_type":"coder","name":"fix-x","prompt":"Fix X","skills":["a","b"],"skill":"fleet-coder"}`,
			func(d *intake.Descriptor) bool {
				return d.AgentType == "coder" && len(d.Skills) == 2 && d.Skill == "fleet-coder"
			}},
	}
	for _, c := range cases {
		d, err := intake.Parse([]byte(c.json))
		if err != nil || !c.check(d) {
			t.Errorf("%s: %+v, %v", c.name, d, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	cases := []struct{ name, json, want string }{
		{"empty file", ``, "empty"},
		{"truncated", `{"version":1,"kind":"pro`, "malformed JSON"},
		{"array", `[1,2]`, "JSON object"},
		{"two values", `{"version":1,"kind":"prompt","prompt":"p"} {}`, "more than one"},
		{"no version", `{"kind":"prompt","prompt":"p"}`, `"version": required`},
		{"version 2", `{"version":2,"kind":"prompt","prompt":"p"}`, `"version": 2 is not supported`},
		{"no kind", `{"version":1,"prompt":"p"}`, `"kind": required`},
		{"bad kind", `{"version":1,"kind":"shell","prompt":"p"}`, `"kind": "shell" is not one of`},
		{"missing prompt", `{"version":1,"kind":"prompt"}`, `"prompt": required`},
		{"empty string", `{"version":1,"kind":"prompt","prompt":"p","subject":""}`, `"subject": empty strings are refused`},
		{"wrong type", `{"version":1,"kind":"prompt","prompt":42}`, `"prompt": want a string, got a number`},
		{"unknown field", `{"version":1,"kind":"prompt","prompt":"p","colour":"red"}`, `unknown field "colour"`},
		{"send field on prompt", `{"version":1,"kind":"prompt","prompt":"p","body":"b"}`, `unknown field "body"`},
		{"bad priority", `{"version":1,"kind":"prompt","prompt":"p","priority":"urgent"}`, `"priority": "urgent"`},
		{"send without to", `{"version":1,"kind":"send","subject":"s","body":"b"}`, `"to": required when "thread"`},
		{"send without subject", `{"version":1,"kind":"send","to":"X","body":"b"}`, `"subject": required`},
		{"bad artifact", `{"version":1,"kind":"send","to":"X","subject":"s","artifacts":[{"kind":"log"}]}`, `artifacts[0]: field "path": required`},
		{"artifact extra", `{"version":1,"kind":"send","to":"X","subject":"s","artifacts":[{"path":"p","size":1}]}`, `unknown field "size" in artifacts[0]`},
		{"bad agent_type", `{"version":1,"kind":"spawn_worker","agent_type":"wizard","name":"n","prompt":"p"}`, `"agent_type": "wizard" is not one of general-purpose|`},
		{"spawn without name", `{"version":1,"kind":"spawn_worker","agent_type":"coder","prompt":"p"}`, `"name": required`},
		{"empty skill", `{"version":1,"kind":"spawn_worker","agent_type":"coder","name":"n","prompt":"p","skills":["a",""]}`, `"skills"[1]: empty`},
		{"version as a string", `{"version":"1","kind":"prompt","prompt":"p"}`, `field "version": want the number 1, not a string`},
		{"version 1.0", `{"version":1.0,"kind":"prompt","prompt":"p"}`, `field "version": 1.0 is not supported (use 1)`},
		{"version null", `{"version":null,"kind":"prompt","prompt":"p"}`, `field "version": null is not supported (use 1)`},
		{"duplicate field", `{"version":1,"kind":"prompt","prompt":"a","prompt":"b"}`, `field "prompt": given twice (duplicate keys are refused`},
		{"duplicate version", `{"version":2,"version":1,"kind":"prompt","prompt":"p"}`, `field "version": given twice`},
		{"duplicate kind", `{"version":1,"kind":"spawn_worker","kind":"prompt","prompt":"p"}`, `field "kind": given twice`},
		{"duplicate in payload", `{"version":1,"kind":"send","to":"X","subject":"s","payload":{"a":1,"b":{"c":1,"c":2}}}`, `field "payload.b": key "c" given twice`},
		{"duplicate in artifact", `{"version":1,"kind":"send","to":"X","subject":"s","artifacts":[{"path":"p"},{"path":"p","path":"q"}]}`, `field "artifacts[1]": key "path" given twice`},
		{"too big", `{"version":1,"kind":"prompt","prompt":"` + strings.Repeat("x", intake.MaxSize) + `"}`, "the limit is 65536"},
	}
	for _, c := range cases {
		_, err := intake.Parse([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := intake.Parse([]byte(`{"version":1,"kind":"pro`)); !errors.Is(err, intake.ErrSyntax) {
		t.Errorf("a truncated file is not ErrSyntax: %v", err)
	}
	if _, err := intake.Parse([]byte(`{"version":1,"kind":"prompt"}`)); errors.Is(err, intake.ErrSyntax) {
		t.Errorf("a schema error is ErrSyntax")
	}
}
