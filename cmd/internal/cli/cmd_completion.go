package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

var completionCommand = &command{
	name: "completion", args: "bash|zsh|fish", short: "print a shell completion script",
	long: `Print a completion script for bash, zsh or fish: commands, their flags, and
the fixed values of --kind and --priority. Load it in your shell's start-up
file, or save it where your shell looks for completions.`,
	examples: []string{
		"source <(inbox completion bash)      # in ~/.bashrc",
		"source <(inbox completion zsh)       # in ~/.zshrc",
		"inbox completion fish > ~/.config/fish/completions/inbox.fish",
	},
	new: func() runner { return &completionCmd{} },
}

// completionCmd prints a shell completion script. The scripts are
// generated from the command table and each command's flag set, so they
// never fall behind the CLI.
type completionCmd struct{}

func (r *completionCmd) flags(fs *pflag.FlagSet, c *call) {}

func (r *completionCmd) run(c *call) (*result, error) {
	if len(c.args) != 1 {
		return nil, usagef("shell", "name one shell: inbox completion bash|zsh|fish")
	}
	var gen func(io.Writer, []completionEntry)
	switch c.args[0] {
	case "bash":
		gen = bashCompletion
	case "zsh":
		gen = zshCompletion
	case "fish":
		gen = fishCompletion
	default:
		return nil, usagef("shell", "unknown shell %q: inbox completion knows bash, zsh and fish", c.args[0])
	}
	var b strings.Builder
	gen(&b, completionEntries())
	script := b.String()
	res := &result{}
	res.set("shell", c.args[0]).set("script", script)
	res.human = func(w io.Writer) { io.WriteString(w, script) }
	return res, nil
}

// completionEntry is one command as a shell sees it.
type completionEntry struct {
	name, short string
	flags       []completionFlag
	args        []string // fixed choices for the first argument
}

type completionFlag struct {
	name, usage string
	values      []string // fixed choices, when the flag has them
	file        bool     // takes a path
	boolean     bool     // takes no value
}

// flagValues lists the fixed choices of flags that have them.
var flagValues = map[string][]string{
	"kind":     {"task", "progress", "question", "answer", "result", "control", "event"},
	"priority": {"low", "normal", "high"},
}

func completionEntries() []completionEntry {
	var out []completionEntry
	for _, c := range commands {
		if c.hidden {
			continue
		}
		e := completionEntry{name: c.name, short: c.short}
		if c.name == "completion" {
			e.args = []string{"bash", "zsh", "fish"}
		}
		cl, _ := c.prepare(globals{}, nil)
		cl.fs.VisitAll(func(f *pflag.Flag) {
			cf := completionFlag{name: f.Name, usage: firstLine(f.Usage), values: flagValues[f.Name]}
			cf.file = f.Name == "db" || strings.HasSuffix(f.Name, "-file") || f.Name == "intake"
			cf.boolean = f.NoOptDefVal != ""
			e.flags = append(e.flags, cf)
		})
		out = append(out, e)
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func bashCompletion(w io.Writer, cmds []completionEntry) {
	fmt.Fprint(w, `# bash completion for inbox. Load it with:
#   source <(inbox completion bash)
# or save it as ~/.local/share/bash-completion/completions/inbox
_inbox() {
	local cur prev cmd i
	cur="${COMP_WORDS[COMP_CWORD]}"
	prev="${COMP_WORDS[COMP_CWORD-1]}"
	cmd=""
	for ((i = 1; i < COMP_CWORD; i++)); do
		case "${COMP_WORDS[i]}" in
		--db|--agent) ((i++)) ;;
		-*) ;;
		*) cmd="${COMP_WORDS[i]}"; break ;;
		esac
	done
	case "$prev" in
	--db|--body-file|--intake) COMPREPLY=($(compgen -f -- "$cur")); return ;;
`)
	for _, name := range slices.Sorted(maps.Keys(flagValues)) {
		fmt.Fprintf(w, "\t--%s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", name, strings.Join(flagValues[name], " "))
	}
	fmt.Fprint(w, "\tesac\n\tif [[ -z \"$cmd\" ]]; then\n")
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	names = append(names, "help", "version")
	fmt.Fprintf(w, "\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(names, " ")+" --db --json --agent --help --version")
	fmt.Fprint(w, "\tcase \"$cmd\" in\n")
	for _, c := range cmds {
		fl := c.args
		for _, f := range c.flags {
			fl = append(fl, "--"+f.name)
		}
		fmt.Fprintf(w, "\t%s) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", c.name, strings.Join(fl, " "))
	}
	fmt.Fprint(w, "\thelp) COMPREPLY=($(compgen -W \""+strings.Join(names, " ")+"\" -- \"$cur\")) ;;\n")
	fmt.Fprint(w, "\tesac\n}\ncomplete -o default -F _inbox inbox\n")
}

func zshCompletion(w io.Writer, cmds []completionEntry) {
	fmt.Fprint(w, `#compdef inbox
# zsh completion for inbox. Load it with:
#   source <(inbox completion zsh)
# or save it as _inbox in a directory on your $fpath
_inbox() {
	local -a commands
	commands=(
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "\t\t%s\n", zshQuote(c.name+":"+c.short))
	}
	fmt.Fprint(w, "\t\t'help:show help for a command'\n\t\t'version:print the version'\n\t)\n")
	fmt.Fprint(w, `	if (( CURRENT == 2 )); then
		_describe -t commands 'inbox command' commands
		return
	fi
	local cmd=${words[2]}
	shift words; (( CURRENT-- ))
	case $cmd in
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "\t%s)\n\t\t_arguments", c.name)
		for _, f := range c.flags {
			spec := "--" + f.name + "[" + zshEscape(f.usage) + "]"
			if f.name == "help" {
				spec = "(-h --help)--help[show this help]"
			} else if len(f.values) > 0 {
				spec += ":" + f.name + ":(" + strings.Join(f.values, " ") + ")"
			} else if f.file {
				spec += ":" + f.name + ":_files"
			} else if !f.boolean {
				spec += ":" + f.name + ": "
			}
			fmt.Fprintf(w, " \\\n\t\t\t%s", zshQuote(spec))
		}
		if len(c.args) > 0 {
			fmt.Fprintf(w, " \\\n\t\t\t'1:argument:(%s)'", strings.Join(c.args, " "))
		}
		fmt.Fprint(w, " \\\n\t\t\t'*::argument: '\n\t\t;;\n")
	}
	fmt.Fprint(w, "\thelp) _describe -t commands 'inbox command' commands ;;\n\tesac\n}\n")
	fmt.Fprint(w, "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n\t_inbox \"$@\"\nelse\n\tcompdef _inbox inbox\nfi\n")
}

func fishCompletion(w io.Writer, cmds []completionEntry) {
	fmt.Fprint(w, `# fish completion for inbox. Load it with:
#   inbox completion fish | source
# or save it as ~/.config/fish/completions/inbox.fish
complete -c inbox -f
`)
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	all := strings.Join(append(names, "help", "version"), " ")
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c inbox -n 'not __fish_seen_subcommand_from %s' -a %s -d %s\n", all, c.name, fishQuote(c.short))
	}
	for _, c := range cmds {
		if len(c.args) > 0 {
			fmt.Fprintf(w, "complete -c inbox -n '__fish_seen_subcommand_from %s' -a %s\n", c.name, fishQuote(strings.Join(c.args, " ")))
		}
	}
	for _, c := range cmds {
		for _, f := range c.flags {
			line := fmt.Sprintf("complete -c inbox -n '__fish_seen_subcommand_from %s' -l %s -d %s", c.name, f.name, fishQuote(f.usage))
			switch {
			case len(f.values) > 0:
				line += " -x -a " + fishQuote(strings.Join(f.values, " "))
			case f.file:
				line += " -r -F"
			case !f.boolean:
				line += " -x"
			}
			fmt.Fprintln(w, line)
		}
	}
}

func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// zshEscape escapes what _arguments treats specially in a description.
func zshEscape(s string) string {
	return strings.NewReplacer("[", `\[`, "]", `\]`, ":", `\:`).Replace(s)
}
