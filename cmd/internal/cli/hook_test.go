package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox"
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
	text := contextText("dev", st)
	if len(text) > maxHookContext {
		t.Fatalf("%d bytes of context, over %d", len(text), maxHookContext)
	}
	if !strings.HasSuffix(text, "`inbox list --assigned-to dev`") {
		t.Errorf("the cut context does not say where the rest is: ...%s", text[len(text)-100:])
	}
	if contextText("dev", &hookState{}) != "" {
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
			in, err := mergeHooks([]byte(f), tool, " --agent dev", false)
			if err != nil {
				t.Fatalf("%s install into %q: %v", tool, f, err)
			}
			again, _ := mergeHooks(in, tool, " --agent dev", false)
			if string(again) != string(in) {
				t.Errorf("%s: a second install changed the file:\n%s\n%s", tool, in, again)
			}
			out, err := mergeHooks(in, tool, "", true)
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
