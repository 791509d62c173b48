package inbox

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// seed002Examples are the example messages of seed 002, as lines.
var seed002Examples = []string{
	`{"type":"task_assignment","from":"coordinator","to":"backend-dev","timestamp":"2026-02-15T10:30:00Z","content":{"taskId":"a1b2c3d4-e5f6-7890-abcd-ef1234567890","subject":"Implement user authentication API","priority":4,"estimatedHours":8}}`,
	`{"type":"task_status_request","from":"coordinator","to":"backend-dev","timestamp":"2026-02-15T11:00:00Z","content":{"taskId":"a1b2c3d4-e5f6-7890-abcd-ef1234567890"}}`,
	`{"type":"message","from":"coordinator","to":"backend-dev","timestamp":"2026-02-15T11:15:00Z","content":{"text":"Please prioritize the authentication task, frontend is blocked."}}`,
	`{"type":"team_broadcast","from":"coordinator","to":"all","timestamp":"2026-02-15T09:00:00Z","content":{"text":"Daily standup in 30 minutes","recipients":["backend-dev","frontend-dev","tester"]}}`,
	`{"type":"idle_notification","from":"backend-dev","to":"coordinator","timestamp":"2026-02-15T15:30:00Z","content":{"reason":"no_assigned_tasks","lastTaskCompleted":"a1b2c3d4-e5f6-7890-abcd-ef1234567890"}}`,
	`{"type":"task_completion","from":"backend-dev","to":"coordinator","timestamp":"2026-02-15T16:00:00Z","content":{"taskId":"a1b2c3d4-e5f6-7890-abcd-ef1234567890","actualHours":7.5,"notes":"Implemented with JWT, added rate limiting"}}`,
	`{"type":"blocking_notification","from":"tester","to":"coordinator","timestamp":"2026-02-15T14:00:00Z","content":{"taskId":"b2c3d4e5-f6a7-8901-bcde-f12345678901","blockedBy":["a1b2c3d4-e5f6-7890-abcd-ef1234567890"],"reason":"Cannot test authentication until implementation is complete"}}`,
	`{"type":"task_assignment","ackId":"msg-12345","from":"coordinator","to":"backend-dev","timestamp":"2026-02-15T10:30:00Z","content":{}}`,
	`{"type":"acknowledgment","from":"backend-dev","to":"coordinator","timestamp":"2026-02-15T10:31:00Z","content":{"ackId":"msg-12345"}}`,
	`{"type":"task_status_request","from":"coordinator","to":"backend-dev","timestamp":"2026-02-15T11:00:00Z","requestId":"req-98765","content":{"taskId":"a1b2c3d4-e5f6-7890-abcd-ef1234567890"}}`,
	`{"type":"task_status_response","from":"backend-dev","to":"coordinator","timestamp":"2026-02-15T11:01:00Z","requestId":"req-98765","content":{"taskId":"a1b2c3d4-e5f6-7890-abcd-ef1234567890","status":"in_progress","progress":60,"eta":"2026-02-15T14:00:00Z"}}`,
	// Members seed 002 does not name travel along.
	`{"type":"custom_thing","from":"a","to":"@team","timestamp":"2026-02-15T11:01:00Z","content":{"x":[1,{"y":null}]},"priority":"high","meta":{"trace":"t-1"}}`,
}

// asMessage is what a store makes of a line: the message a send with its
// SendContent writes.
func asMessage(l *Seed002) *Message {
	c := l.SendContent()
	m := &Message{MessageID: "msg_1", FromAgent: l.From, ToAgent: l.To, Type: c.Type, PayloadJSON: json.RawMessage(c.PayloadJSON),
		RequestID: c.RequestID, CreatedAt: "2026-11-25T00:00:00.000000Z", Body: c.Body, Summary: c.Summary}
	if c.AckID != "" {
		m.AckID = c.AckID
	}
	if c.Timestamp != m.CreatedAt {
		m.Timestamp = c.Timestamp
	}
	m.Extra = c.Extra
	return m
}

func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

func TestSeed002RoundTrip(t *testing.T) {
	for _, line := range seed002Examples {
		l, err := ParseSeed002([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		back := Seed002Of(asMessage(l)).Line()
		if !reflect.DeepEqual(jsonValue(t, back), jsonValue(t, []byte(line))) {
			t.Errorf("round trip changed the line:\n in: %s\nout: %s", line, back)
		}
		// And again: the written line is itself a fixed point.
		l2, err := ParseSeed002(back)
		if err != nil {
			t.Fatal(err)
		}
		if again := Seed002Of(asMessage(l2)).Line(); string(again) != string(back) {
			t.Errorf("not a fixed point:\n%s\n%s", back, again)
		}
	}
}

func TestSeed002FromMessage(t *testing.T) {
	m := &Message{FromAgent: "a", ToAgent: "b,c", Body: "hello", PayloadJSON: json.RawMessage("{}"), CreatedAt: "2026-11-25T00:00:00.000000Z"}
	got := string(Seed002Of(m).Line())
	want := `{"type":"message","from":"a","to":"b,c","timestamp":"2026-11-25T00:00:00.000000Z","content":{"text":"hello"}}`
	if got != want {
		t.Errorf("an untyped message:\n got %s\nwant %s", got, want)
	}
	l, _ := ParseSeed002([]byte(seed002Examples[0]))
	if c := l.SendContent(); c.Summary != "Implement user authentication API" || c.Type != TypeTaskAssignment {
		t.Errorf("summary %q type %q", c.Summary, c.Type)
	}
	if c := mustParse(t, seed002Examples[7]).SendContent(); !c.AckRequired || c.AckID != "msg-12345" {
		t.Errorf("ackId on a task assignment asks for acknowledgment: %+v", c)
	}
	if c := mustParse(t, seed002Examples[8]).SendContent(); c.AckRequired {
		t.Error("an acknowledgment asks for one")
	}
}

func mustParse(t *testing.T, line string) *Seed002 {
	t.Helper()
	l, err := ParseSeed002([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestSeed002Refusals(t *testing.T) {
	for line, field := range map[string]string{
		`not json`: "seed002",
		`[1]`:      "seed002",
		`{"from":"a","to":"b","timestamp":"t","content":{}}`:                   "seed002",
		`{"type":"message","to":"b","content":{}}`:                             "seed002",
		`{"type":"message","from":"a","to":7,"content":{}}`:                    "seed002",
		`{"type":"Message","from":"a","to":"b","content":{}}`:                  "seed002",
		`{"type":"message","from":"a","to":"b","content":"text"}`:              "seed002",
		`{"type":"message","from":"a","to":"b","content":{},"requestId":true}`: "seed002",
	} {
		_, err := ParseSeed002([]byte(line))
		var e *Error
		if !errors.As(err, &e) || e.Field != field {
			t.Errorf("%s: %v, want an error on %s", line, err, field)
		}
	}
	// A line without content or timestamp is read with {} and "".
	l := mustParse(t, `{"type":"message","from":"a","to":"b"}`)
	if string(l.Content) != "{}" || l.Timestamp != "" {
		t.Errorf("defaults: %+v", l)
	}
}

func TestParseAddress(t *testing.T) {
	a, err := ParseAddress("to", "a,b", "@devs", "b", "all")
	if err != nil {
		t.Fatal(err)
	}
	if a.Given != "a,b,@devs,b,all" || !reflect.DeepEqual(a.Agents, []string{"a", "b"}) || !reflect.DeepEqual(a.Teams, []string{"devs"}) || !a.All || a.Single() {
		t.Errorf("%+v", a)
	}
	if a, _ := ParseAddress("to", "solo"); !a.Single() {
		t.Errorf("one agent is single: %+v", a)
	}
	for _, bad := range []string{"", "a,,b", "@", "@x/y", "a b", ","} {
		if _, err := ParseAddress("to", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
