package main

import (
	_ "embed"
	"io"

	"github.com/spf13/pflag"
)

//go:embed SKILL.md
var skillMD string

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
