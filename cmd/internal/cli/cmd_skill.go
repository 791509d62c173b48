package cli

import (
	_ "embed"
	"io"

	"github.com/spf13/pflag"
)

//go:embed SKILL.md
var skillMD string

var skillCommand = &command{
	name: "skill", short: "print SKILL.md, the guide for agents using inbox",
	long: `Print the embedded SKILL.md: when and how an agent should use inbox, with
the worker loop and copyable commands. Install it where your agent runtime
looks for skills.`,
	examples: []string{"inbox skill > ~/.claude/skills/inbox/SKILL.md"},
	new:      func() runner { return &skillCmd{} },
}

type skillCmd struct{}

func (r *skillCmd) flags(fs *pflag.FlagSet, c *call) {}

func (r *skillCmd) run(c *call) (*result, error) {
	if err := c.noArgs(); err != nil {
		return nil, err
	}
	res := &result{}
	res.set("skill", skillMD)
	res.human = func(w io.Writer) { io.WriteString(w, skillMD) }
	return res, nil
}
