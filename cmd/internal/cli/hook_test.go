package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonedit"
)

// TestHookContextCap: the context is at most 8 KB however much is open, and
// says where the rest is.
func TestHookContextCap(t *testing.T) {
	st := &hookState{question: map[string]*inbox.Message{}}
	for i := range 500 {
		st.mail = append(st.mail, &inbox.Message{MessageID: fmt.Sprint("msg_", i), FromAgent: "lead", Kind: "progress",
			ThreadID: fmt.Sprint("thr_", i), Summary: strings.Repeat("x", 150)})
		st.held = append(st.held, &inbox.Thread{ThreadID: fmt.Sprint("thr_h", i), Status: "claimed", Subject: "s"})
	}
	text := contextText(shellCmds{bin: "inbox", agent: "dev"}, st)
	if len(text) > maxHookContext {
		t.Fatalf("%d bytes of context, over %d", len(text), maxHookContext)
	}
	if !strings.HasSuffix(text, "`inbox list --assigned-to dev`") {
		t.Errorf("the cut context does not say where the rest is: ...%s", text[len(text)-100:])
	}
	if contextText(shellCmds{bin: "inbox", agent: "dev"}, &hookState{}) != "" {
		t.Error("context with nothing open")
	}
}

// TestMergeHooksRoundTrip: install then uninstall gives back every file
// byte for byte, whatever it held (but an empty "hooks" object or event
// array that was there before install: uninstall removes the containers
// it leaves empty).
func TestMergeHooksRoundTrip(t *testing.T) {
	files := []string{
		``,
		`{}`,
		"{\n  \"a\": 1\n}\n",
		"{\n\t\"hooks\": {\n\t\t\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"x\"}, {\"type\": \"command\", \"command\": \"inbox hook other Stop\"}]}]\n\t},\n\t\"z\": [1, 2]\n}",
		`{"env":{"K":"v"},"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"a"}]}],"SessionStart":[{"matcher":"startup","hooks":[{"type":"command","command":"b"}]}]},"x":null}`,
	}
	for _, tool := range hookTools {
		for _, f := range files {
			in, err := mergeHooks([]byte(f), tool, "/opt/bin/inbox", " --agent dev", false)
			if err != nil {
				t.Fatalf("%s install into %q: %v", tool, f, err)
			}
			again, _ := mergeHooks(in, tool, "/opt/bin/inbox", " --agent dev", false)
			if string(again) != string(in) {
				t.Errorf("%s: a second install changed the file:\n%s\n%s", tool, in, again)
			}
			out, err := mergeHooks(in, tool, "", "", true)
			if err != nil {
				t.Fatal(err)
			}
			want := f
			if strings.TrimSpace(f) == "" {
				want = "{}\n"
			}
			if string(out) != want {
				t.Errorf("%s: install then uninstall of %q gave %q", tool, f, out)
			}
		}
	}
}

// TestStopMarkNews: a stop blocks again only for what the session's last
// block did not tell about, and a mark reads back as it was written.
func TestStopMarkNews(t *testing.T) {
	msg := func(ev int64) *inbox.Message { return &inbox.Message{MessageID: fmt.Sprint("msg_", ev), EventID: ev} }
	thr := func(id string) *inbox.Thread { return &inbox.Thread{ThreadID: id, Status: "claimed"} }
	told := &hookState{held: []*inbox.Thread{thr("thr_a")}, mail: []*inbox.Message{msg(9)}, mailN: 3, owed: []*inbox.Message{msg(7)}}
	m := parseStopMark(told.mark(stopMark{}).String())
	if got, want := m.String(), told.mark(stopMark{}).String(); got != want {
		t.Fatalf("mark read back as %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name string
		now  *hookState
		news bool
	}{
		{"the same", told, false},
		{"some mail collected", &hookState{held: told.held, mail: []*inbox.Message{msg(8)}, mailN: 2, owed: told.owed}, false},
		{"thread finished, acknowledged", &hookState{mail: told.mail, mailN: 3}, false},
		{"newer mail", &hookState{held: told.held, mail: []*inbox.Message{msg(12)}, mailN: 3, owed: told.owed}, true},
		{"more mail, committed late", &hookState{held: told.held, mail: []*inbox.Message{msg(9)}, mailN: 4, owed: told.owed}, true},
		{"a new claim", &hookState{held: []*inbox.Thread{thr("thr_a"), thr("thr_b")}, mail: told.mail, mailN: 3, owed: told.owed}, true},
		{"a new acknowledgment", &hookState{held: told.held, mail: told.mail, mailN: 3, owed: []*inbox.Message{msg(7), msg(11)}}, true},
	} {
		if got := tc.now.news(m); got != tc.news {
			t.Errorf("%s: news %v, want %v", tc.name, got, tc.news)
		}
	}
	// A mark an older inbox wrote (a fingerprint), or none: everything is news.
	for _, old := range []string{"", "3f2a9c0d1e", "stop2 garbage", "stop2 m=1 n=x a=0 k=0 t=", "stop2 m=1 n=1 a=0 k=0 h="} {
		if !told.news(parseStopMark(old)) {
			t.Errorf("mark %q: the state is not news", old)
		}
	}
	// After collecting the newest, the mark keeps the newest told about.
	if m2 := (&hookState{mail: []*inbox.Message{msg(4)}, mailN: 1}).mark(m); m2.mail != 9 {
		t.Errorf("mark after the newest was collected: mail %d, want 9", m2.mail)
	}
}

// TestMergeHooksReplaces: install brings inbox's entry of an older install
// (a bare inbox, another path, other flags) up to date where it stands,
// drops a second one, and keeps every other hook.
func TestMergeHooksReplaces(t *testing.T) {
	old := `{"hooks": {
  "Stop": [
    {"hooks": [{"type": "command", "command": "say done"}, {"type": "command", "command": "inbox hook claude Stop --agent old"}]},
    {"hooks": [{"type": "command", "command": "'/old bin/inbox' hook claude Stop"}]}
  ],
  "SessionStart": [{"hooks": [{"type": "command", "command": "/usr/bin/inbox hook claude SessionStart"}]}]
}}`
	got, err := mergeHooks([]byte(old), "claude", "'/new bin/inbox'", " --agent dev", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eventNamesList("claude") {
		want := `"command": "'/new bin/inbox' hook claude ` + e + ` --agent dev"`
		if n := strings.Count(string(got), want); n != 1 {
			t.Errorf("%d entries %s, want 1:\n%s", n, want, got)
		}
	}
	if n := strings.Count(string(got), "hook claude"); n != len(eventNamesList("claude")) {
		t.Errorf("%d inbox entries, want one an event:\n%s", n, got)
	}
	if !strings.Contains(string(got), `{"hooks": [{"type": "command", "command": "say done"}, {"type": "command", "command": "'/new bin/inbox' hook claude Stop --agent dev"}]}`) {
		t.Errorf("the entry beside another hook is not updated where it stands:\n%s", got)
	}
	if _, err := jsonedit.Parse(got); err != nil {
		t.Errorf("not JSON: %v\n%s", err, got)
	}
}

// TestOurs: an entry inbox installed is recognised under any path and
// quoting, and only for its tool.
func TestOurs(t *testing.T) {
	for cmd, want := range map[string]bool{
		"inbox hook claude Stop":                          true,
		"/usr/local/bin/inbox hook claude Stop --agent a": true,
		"'/my bin/inbox' hook claude Stop":                true,
		`"/my bin/inbox" hook claude Stop`:                true,
		`/my\ bin/inbox hook claude Stop`:                 true,
		"/opt/inbox-nats hook claude Stop":                true,
		"inbox hook codex Stop":                           false,
		"inbox hook other Stop":                           false,
		"say done":                                        false,
		"/bin/notinbox hook claude Stop":                  false,
		"'/my bin/inbox hook claude Stop":                 false,
		"inbox hook claude":                               false,
	} {
		if got := ours(cmd, "claude"); got != want {
			t.Errorf("ours(%q) = %v, want %v", cmd, got, want)
		}
	}
}

// TestHookInputDecode: a hook's stdin gives the members inbox reads, and
// anything but one JSON object is refused.
func TestHookInputDecode(t *testing.T) {
	var in hookInput
	err := in.decode([]byte(`{"session_id":"s1","transcript_path":null,"hook_event_name":"Stop","stop_hook_active":true,"x":[1,{"a":"\u00e9"}]}`))
	if err != nil || in != (hookInput{SessionID: "s1", HookEventName: "Stop", StopHookActive: true}) {
		t.Errorf("got %+v, %v", in, err)
	}
	for _, bad := range []string{`this is not json`, `[]`, `{"session_id":5}`, `{"stop_hook_active":"yes"}`, `{} {}`} {
		if err := new(hookInput).decode([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
