package mcpserver

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
)

// notInputs are the flags of a command that its tool deliberately does
// not take, by "tool.flag" ("*.flag" for every tool), with why. Any other
// flag of the command must be one of the tool's inputs.
var notInputs = map[string]string{
	// Reading a file of the server's machine is not a tool call's to ask
	// for: a tool takes the body inline (and artifacts are references,
	// never read).
	"*.body-file": "reads a file of the server's machine",
	"*.blob":      "goes with --body-file",
	// A tool's result is the command's one JSON object; --seed002 prints a
	// line per message instead.
	"*.seed002": "prints seed-002 lines, not one JSON object",
	// A blocking tool's wait is max_wait_seconds, capped at 50 (SPEC §12);
	// the server passes it as --timeout-seconds.
	"wait_reply.timeout-seconds": "set from max_wait_seconds",
	"watch.timeout-seconds":      "set from max_wait_seconds",
	"receive.timeout-seconds":    "set from max_wait_seconds",
	// A tool call returns once; --follow streams until interrupted.
	"events.follow": "streams until interrupted",
	// What runs a task is the server's own --exec (refused, see refused).
	"run.exec": "the server's, never a call's",
	// team show and team list take no members and change nothing.
	"team_show.member": "the verb takes none",
	"team_show.agent":  "the verb changes nothing",
	"team_list.member": "the verb takes none",
	"team_list.agent":  "the verb changes nothing",
}

// commaLists are the inputs that are one string of comma-separated values
// where the command's flag is a list: the flag splits a value at commas
// (or, for --to, the command joins repeated ones with commas), so both
// spell the same list.
var commaLists = map[string]bool{
	"fetch.status": true, "list.status": true, "watch.status": true,
	"wait_reply.kinds": true, "wait_reply.types": true,
	"send.to": true, "reply.to": true,
}

// renamed are the inputs whose name is not their flag's: seed 003's
// names for the same thing.
var renamed = map[string]string{
	"send.message": "body",
}

// kindOf is the kind of value an input or a flag holds: bool, int, float,
// string or list.
func kindOf(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64:
		return "int"
	case reflect.Float64:
		return "float"
	case reflect.String:
		return "string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "list"
		}
	}
	return t.String()
}

func flagKind(f *pflag.Flag) string {
	switch typ := f.Value.Type(); typ {
	case "int", "int64":
		return "int"
	case "float64":
		return "float"
	case "stringSlice", "stringArray":
		return "list"
	default:
		return typ
	}
}

// TestToolInputsMatchFlags fails when a tool's inputs and its command's
// flags disagree: every input is passed as a real flag of the command
// (the same name with - for _, unless renamed) holding the same kind of
// value, and every flag of the command is an input or in notInputs.
func TestToolInputsMatchFlags(t *testing.T) {
	for _, spec := range toolTable {
		t.Run(spec.name, func(t *testing.T) {
			fs := cli.CommandFlags(spec.cmd[0])
			if fs == nil {
				t.Fatalf("tool %s runs %q, which is no command", spec.name, spec.cmd[0])
			}
			passed := map[string]bool{}
			for _, in := range inputs(spec.in) {
				key := spec.name + "." + in.name
				if in.pos || in.flag == "" {
					continue // an argument, or the server's own (max_wait_seconds)
				}
				want := strings.ReplaceAll(in.name, "_", "-")
				if r := renamed[key]; r != "" {
					want = r
				}
				if in.flag != want {
					t.Errorf("input %s is passed as --%s, want --%s", in.name, in.flag, want)
				}
				f := fs.Lookup(in.flag)
				if f == nil {
					t.Errorf("input %s: inbox %s has no --%s", in.name, spec.cmd[0], in.flag)
					continue
				}
				passed[f.Name] = true
				got, want := kindOf(in.typ), flagKind(f)
				if got != want && !(got == "string" && want == "list" && commaLists[key]) {
					t.Errorf("input %s is a %s, but --%s of inbox %s takes a %s", in.name, got, f.Name, spec.cmd[0], want)
				}
			}
			fs.VisitAll(func(f *pflag.Flag) {
				if passed[f.Name] || notInputs[spec.name+"."+f.Name] != "" || notInputs["*."+f.Name] != "" {
					return
				}
				t.Errorf("--%s of inbox %s is neither an input of tool %s nor in notInputs", f.Name, spec.cmd[0], spec.name)
			})
			for field := range refused[spec.name] {
				if fs.Lookup(strings.ReplaceAll(field, "_", "-")) == nil {
					t.Errorf("refused input %s is no flag of inbox %s", field, spec.cmd[0])
				}
			}
		})
	}
}

// TestNotInputsAreFlags keeps notInputs, commaLists and renamed honest:
// each names a tool and, where it names a flag, a flag of the tool's
// command.
func TestNotInputsAreFlags(t *testing.T) {
	specs := map[string]toolSpec{}
	for _, s := range toolTable {
		specs[s.name] = s
	}
	for key := range notInputs {
		tool, flag, _ := strings.Cut(key, ".")
		if tool == "*" {
			continue
		}
		s, ok := specs[tool]
		if !ok {
			t.Errorf("notInputs: no tool %s", tool)
			continue
		}
		if cli.CommandFlags(s.cmd[0]).Lookup(flag) == nil {
			t.Errorf("notInputs: inbox %s has no --%s", s.cmd[0], flag)
		}
	}
	for key := range commaLists {
		tool, _, _ := strings.Cut(key, ".")
		if _, ok := specs[tool]; !ok {
			t.Errorf("commaLists: no tool %s", tool)
		}
	}
	for key := range renamed {
		tool, _, _ := strings.Cut(key, ".")
		if _, ok := specs[tool]; !ok {
			t.Errorf("renamed: no tool %s", tool)
		}
	}
}

// TestToArgs checks how inputs become arguments: flags by name, embedded
// structs in place, positional ones after --, zero values and the
// server's own inputs left out.
func TestToArgs(t *testing.T) {
	wait := 3.0
	after := int64(0)
	for _, tc := range []struct {
		in   any
		want string
	}{
		{fetchIn{}, ""},
		{fetchIn{Agent: "a", Limit: 5, Unread: true}, "--agent=a --limit=5 --unread=true"},
		{sendIn{To: "b", Message: "hi", contentIn: contentIn{artifactIn: artifactIn{Artifact: []string{"x", "y"}, ArtifactKind: []string{"log"}}}},
			"--to=b --body=hi --artifact=x --artifact=y --artifact-kind=log"},
		{waitReplyIn{Thread: "t", AfterEvent: &after, waitIn: waitIn{MaxWaitSeconds: &wait}}, "--thread=t --after-event=0"},
		{teamIn{teamNameIn: teamNameIn{Team: "ops"}, Member: []string{"a"}}, "--member=a -- ops"},
		{pushIn{Prompt: "--not-a-flag", Name: "n"}, "--name=n -- --not-a-flag"},
	} {
		if got := strings.Join(toArgs(tc.in), " "); got != tc.want {
			t.Errorf("toArgs(%#v): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
