package mcpserver

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/inbox-dev/inbox/cmd/internal/cli"
)

// skillText is SKILL.md as `inbox skill` prints it.
func skillText(t *testing.T) string {
	t.Helper()
	out, code := cli.Invoke(context.Background(), nil, func(string) string { return "" }, "skill", nil)
	var res struct {
		Skill string `json:"skill"`
	}
	if err := json.Unmarshal(out, &res); err != nil || code != 0 || res.Skill == "" {
		t.Fatalf("inbox skill --json: exit %d, %s (%v)", code, out, err)
	}
	return res.Skill
}

// skillSnippets are the pieces of SKILL.md an agent copies: every line of
// its code blocks, and every `code span` of its prose.
func skillSnippets(md string) []string {
	var out []string
	inBlock := false
	span := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inBlock = !inBlock
		case inBlock:
			out = append(out, line)
		default:
			for _, m := range span.FindAllStringSubmatch(line, -1) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// globalFlags are the flags every command takes.
var globalFlags = map[string]bool{"db": true, "json": true, "agent": true, "lock-timeout": true, "help": true}

// TestSkillCommandsAreReal: every `inbox COMMAND --flag` SKILL.md shows
// is a command of the CLI with that flag, so an agent that copies one
// does not meet "unknown flag".
func TestSkillCommandsAreReal(t *testing.T) {
	call := regexp.MustCompile(`(?:^|[\s($])inbox ([a-z][a-z0-9-]*)`)
	flag := regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
	seen := 0
	for _, snip := range skillSnippets(skillText(t)) {
		if i := strings.Index(snip, " #"); i >= 0 {
			snip = snip[:i] // a shell comment
		}
		locs := call.FindAllStringSubmatchIndex(snip, -1)
		for i, loc := range locs {
			cmd := snip[loc[2]:loc[3]]
			end := len(snip)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			if p := strings.IndexByte(snip[loc[1]:end], '|'); p >= 0 {
				end = loc[1] + p
			}
			fs := cli.CommandFlags(cmd)
			if fs == nil {
				t.Errorf("SKILL.md shows `inbox %s`, which is no command: %q", cmd, snip)
				continue
			}
			seen++
			for _, m := range flag.FindAllStringSubmatch(snip[loc[1]:end], -1) {
				if !globalFlags[m[1]] && fs.Lookup(m[1]) == nil {
					t.Errorf("SKILL.md gives inbox %s the flag --%s, which it does not have: %q", cmd, m[1], snip)
				}
			}
		}
	}
	if seen < 20 {
		t.Errorf("found only %d commands in SKILL.md", seen)
	}
}

// TestSkillMCPSection: SKILL.md's MCP section names real tools, inputs
// and result keys, and the waits' real bounds.
func TestSkillMCPSection(t *testing.T) {
	md := skillText(t)
	_, sec, ok := strings.Cut(md, "\n## Over MCP")
	if !ok {
		t.Fatal(`SKILL.md has no "## Over MCP" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	known := map[string]bool{}
	tools := map[string]bool{}
	for _, spec := range toolTable {
		known[spec.name], tools[spec.name] = true, true
		for _, in := range inputs(spec.in) {
			known[in.name] = true
		}
		s, err := outputSchema(spec.out)
		if err != nil {
			t.Fatal(err)
		}
		propertyNames(s, known)
	}
	named := map[string]bool{}
	word := regexp.MustCompile(`^[a-z][a-z_]*$`)
	for _, snip := range skillSnippets("x\n" + sec) {
		key, _, _ := strings.Cut(strings.Trim(snip, `"`), `"`)
		if !word.MatchString(key) {
			continue
		}
		named[key] = true
		if !known[key] {
			t.Errorf("SKILL.md's MCP section names `%s`: no tool, input or result key", snip)
		}
	}
	for _, w := range []string{"fetch", "claim", "update", "wait_reply", "done", "receive", "max_wait_seconds", "after_event", "next_event_id"} {
		if !named[w] {
			t.Errorf("SKILL.md's MCP section does not name `%s`", w)
		}
	}
	for _, n := range []float64{defaultMaxWait, maxMaxWait} {
		if !strings.Contains(sec, strconv.FormatFloat(n, 'f', -1, 64)) {
			t.Errorf("SKILL.md's MCP section does not say %g seconds", n)
		}
	}
}

// propertyNames adds the name of every property of s, at any depth, to
// names.
func propertyNames(s *jsonschema.Schema, names map[string]bool) {
	if s == nil {
		return
	}
	for k, p := range s.Properties {
		names[k] = true
		propertyNames(p, names)
	}
	propertyNames(s.Items, names)
}
