package cli

// inbox hook install and uninstall: inbox's entries merged into (or taken
// out of) a tool's settings file, everything else in the file kept byte
// for byte (package jsonedit), written atomically with a backup.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/inbox-dev/inbox"
	"github.com/inbox-dev/inbox/internal/jsonedit"
)

func settingsPath(tool string, project bool) (string, error) {
	base := ""
	if !project {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = home
	} else {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		base = wd
	}
	switch tool {
	case "claude":
		return filepath.Join(base, ".claude", "settings.json"), nil
	case "codex":
		return filepath.Join(base, ".codex", "hooks.json"), nil
	}
	return filepath.Join(base, ".gemini", "settings.json"), nil
}

// hookCommandLine is the command an installed hook runs: bin, the inbox
// binary as a shell word, and the flags.
func hookCommandLine(bin, tool, event, flags string) string {
	return bin + " hook " + tool + " " + event + flags
}

// hookFlags are the flags an installed hook passes: the agent and the
// store, when install was given them.
func hookFlags(agent, db string) string {
	var f string
	if agent != "" {
		f += " --agent " + agent
	}
	if db != "" {
		f += " --db " + shellQuote(db)
	}
	return f
}

// inboxBinary is the absolute path of the inbox binary this process is,
// for a hook's settings entry and the commands a hook's reason names: the
// inbox beside this binary when this is a companion (inbox-nats, which
// inbox hands a NATS store's commands to); under the name PATH finds it
// by when that is the same file (a package manager's link outlives an
// upgrade, the versioned file it points at does not); else with its
// symlinks resolved.
func inboxBinary() (string, error) {
	self, err := Executable()
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(self); err == nil {
		self = real
	}
	if filepath.Base(self) != "inbox" {
		if p := filepath.Join(filepath.Dir(self), "inbox"); isExecutable(p) {
			self = p
		}
	}
	if p, err := exec.LookPath("inbox"); err == nil {
		if abs, err := filepath.Abs(p); err == nil && sameFile(abs, self) {
			return abs, nil
		}
	}
	return self, nil
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// shellQuote quotes s for a POSIX shell, unless it needs none.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ours reports whether a hook entry's command is one inbox installed for
// tool, under whatever path: "inbox hook TOOL …", "/usr/local/bin/inbox
// hook TOOL …", "'/my bin/inbox' hook TOOL …".
func ours(cmd, tool string) bool {
	bin, rest, ok := shellWord(cmd)
	if !ok || !strings.HasPrefix(rest, " hook "+tool+" ") {
		return false
	}
	name := bin[strings.LastIndexByte(bin, '/')+1:]
	return name == "inbox" || name == "inbox-nats"
}

// shellWord splits a command line after its first word as a POSIX shell
// reads it (unquoted, '…' and "…" parts, backslash escapes): the word,
// unquoted, and the rest of the line from the blank that ends it. ok is
// false when a quote is left open.
func shellWord(line string) (word, rest string, ok bool) {
	var b strings.Builder
	i := 0
	for i < len(line) {
		switch c := line[i]; c {
		case ' ', '\t':
			return b.String(), line[i:], true
		case '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return "", "", false
			}
			b.WriteString(line[i+1 : i+1+j])
			i += j + 2
		case '"':
			i++
			for i < len(line) && line[i] != '"' {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("$`\"\\", line[i+1]) >= 0 {
					i++
				}
				b.WriteByte(line[i])
				i++
			}
			if i == len(line) {
				return "", "", false
			}
			i++
		case '\\':
			if i+1 < len(line) {
				i++
			}
			b.WriteByte(line[i])
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), "", true
}

// hookEntry and hookGroupJSON are the matcher group inbox adds for an
// event (Gemini CLI entries also carry a name).
type hookEntry struct {
	Name    string `json:"name,omitempty"`
	Type    string `json:"type"`
	Command string `json:"command"`
}

type hookGroupJSON struct {
	Hooks []hookEntry `json:"hooks"`
}

func hookGroup(bin, tool, event, flags string) any {
	h := hookEntry{Type: "command", Command: hookCommandLine(bin, tool, event, flags)}
	if tool == "gemini" {
		h.Name = "inbox"
	}
	return hookGroupJSON{Hooks: []hookEntry{h}}
}

// marshalIndent is v as indented JSON, every line but the first starting
// with prefix.
func marshalIndent(v any, prefix, unit string) string {
	b, _ := json.MarshalIndent(v, prefix, unit)
	return string(b)
}

// groupHasOurs returns a matcher group's "hooks" array and the index in
// it of inbox's entry, or -1.
func groupHasOurs(d *jsonedit.Doc, g *jsonedit.Node, tool string) (*jsonedit.Node, int) {
	hooks := g.Get("hooks")
	if g.Kind != jsonedit.Object || hooks == nil || hooks.Kind != jsonedit.Array {
		return nil, -1
	}
	for i, h := range hooks.Elems {
		if h.Kind != jsonedit.Object {
			continue
		}
		if c := h.Get("command"); c != nil {
			if cmd, ok := jsonString(d.Raw(c)); ok && ours(cmd, tool) {
				return hooks, i
			}
		}
	}
	return nil, -1
}

// mergeHooks returns the settings text with inbox's entries added (or,
// with remove, taken out), everything else as it was. An entry inbox
// installed before (under another path, or with other flags) is brought
// up to date where it stands; a second one for the same event goes.
func mergeHooks(s []byte, tool, bin, flags string, remove bool) ([]byte, error) {
	if len(bytes.TrimSpace(s)) == 0 {
		s = []byte("{}\n")
	}
	d, err := jsonedit.Parse(s)
	if err != nil {
		return nil, err
	}
	root := d.Root
	if root.Kind != jsonedit.Object {
		return nil, errors.New("the settings file is not a JSON object")
	}
	events := eventNamesList(tool)
	hooks := root.Get("hooks")
	if hooks != nil && hooks.Kind != jsonedit.Object {
		return nil, errors.New(`its "hooks" is not an object`)
	}
	if remove {
		if hooks != nil {
			removeHooks(d, hooks, tool, events)
		}
		return d.Bytes(), nil
	}
	if hooks == nil {
		var b strings.Builder
		b.WriteString("{")
		for i, e := range events {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\n%s%q: %s", d.Unit, e, marshalIndent([]any{hookGroup(bin, tool, e, flags)}, d.Unit, d.Unit))
		}
		b.WriteString("\n}")
		d.Append(root, `"hooks": `+b.String())
		return d.Bytes(), nil
	}
	var newMembers []string
	for _, e := range events {
		arr := hooks.Get(e)
		if arr == nil {
			newMembers = append(newMembers, fmt.Sprintf("%q: %s", e, marshalIndent([]any{hookGroup(bin, tool, e, flags)}, "", d.Unit)))
			continue
		}
		if arr.Kind != jsonedit.Array {
			return nil, fmt.Errorf(`its "hooks"."%s" is not an array`, e)
		}
		want := hookCommandLine(bin, tool, e, flags)
		has := false
		var drop []int // groups of a second entry of inbox's, alone in them
		for gi, g := range arr.Elems {
			entries, hi := groupHasOurs(d, g, tool)
			switch {
			case hi < 0:
			case !has:
				has = true
				c := entries.Elems[hi].Get("command")
				if cmd, _ := jsonString(d.Raw(c)); cmd != want {
					d.Replace(c, marshalIndent(want, "", ""))
				}
			case entries.Len() == 1:
				drop = append(drop, gi)
			default:
				d.Remove(entries, hi)
			}
		}
		d.Remove(arr, drop...)
		if !has {
			d.Append(arr, marshalIndent(hookGroup(bin, tool, e, flags), "", d.Unit))
		}
	}
	d.Append(hooks, newMembers...)
	return d.Bytes(), nil
}

// removeHooks takes inbox's entries for tool out of the settings' "hooks"
// object: an entry alone in its matcher group goes with the group, an
// event left with no group goes too, and so does "hooks" itself when
// nothing but inbox's was in it.
func removeHooks(d *jsonedit.Doc, hooks *jsonedit.Node, tool string, events []string) {
	var emptied []int // members of hooks left with no group
	for i, m := range hooks.Members {
		if !slices.Contains(events, m.Key) || m.Value.Kind != jsonedit.Array {
			continue
		}
		groups := m.Value
		var drop []int
		for gi, g := range groups.Elems {
			arr, hi := groupHasOurs(d, g, tool)
			if hi < 0 {
				continue
			}
			if arr.Len() == 1 {
				drop = append(drop, gi)
			} else {
				d.Remove(arr, hi)
			}
		}
		if len(drop) > 0 && len(drop) == groups.Len() {
			emptied = append(emptied, i)
			continue
		}
		d.Remove(groups, drop...)
	}
	if len(emptied) == 0 || len(emptied) < hooks.Len() {
		d.Remove(hooks, emptied...)
		return
	}
	for i, m := range d.Root.Members {
		if m.Key == "hooks" {
			d.Remove(d.Root, i)
		}
	}
}

// jsonString decodes raw, a JSON string.
func jsonString(raw []byte) (string, bool) {
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

func eventNamesList(tool string) []string {
	order := map[string][]string{
		"claude": {"SessionStart", "UserPromptSubmit", "Stop", "SubagentStop", "TeammateIdle"},
		"codex":  {"SessionStart", "UserPromptSubmit", "Stop"},
		"gemini": {"SessionStart", "BeforeAgent", "AfterAgent"},
	}
	return order[tool]
}

func (r *hookCmd) install(c *call, add bool, tool string) (*result, error) {
	p, err := settingsPath(tool, r.project)
	if err != nil {
		return nil, usagef("project", "cannot find the settings directory: %v", err)
	}
	agent := ""
	if c.g.agentSet {
		agent = c.g.agent
		if err := inbox.ValidateAgent("agent", agent); err != nil {
			return nil, err
		}
	}
	db, secret := "", ""
	if add && (c.g.dbSet || c.env.getenv("INBOX_DB") != "") {
		// The store install was given (--db, else INBOX_DB) is the one
		// the hooks use and name in the commands they suggest.
		// A user-level hook runs wherever the tool was started, so the
		// store is named absolutely; a project's runs at the project's
		// root, where a relative path keeps the settings file portable.
		// A NATS store's URL is written without its secret (SPEC §8): the
		// hook finds it in the tool's environment.
		db = c.g.db
		switch {
		case isNATS(db):
			envSecret, err := inbox.NATSSecret(c.env.getenv)
			if err != nil {
				return nil, err
			}
			var cred inbox.NATSCredentials
			db, cred = inbox.SplitNATSURL(db, envSecret)
			secret = cred.Secret()
		case !r.project:
			if db, err = filepath.Abs(db); err != nil {
				return nil, usagef("db", "%v", err)
			}
		}
	}
	// A settings file that is a symlink (a dotfiles repository's) is
	// written through: the link stays, and its target is replaced.
	target, err := linkTarget(p)
	if err != nil {
		return nil, inbox.Storage(err, "resolve the symlink %s", p)
	}
	old, err := os.ReadFile(target)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, inbox.Storage(err, "read %s", target)
	}
	// The hooks run inbox by its absolute path: the tool's PATH may not
	// hold it, and a hook that is not found does nothing, silently.
	bin, err := inboxBinary()
	if err != nil {
		return nil, inbox.Internal(fmt.Errorf("find the path of the inbox binary for the hooks: %w", err))
	}
	updated, err := mergeHooks(old, tool, shellQuote(bin), hookFlags(agent, db), !add)
	if err != nil {
		return nil, inbox.Invalid("settings", "%s: %v: fix it by hand, then try again", p, err)
	}
	res := &result{}
	changed := !bytes.Equal(old, updated)
	verb := map[bool]string{true: "install", false: "uninstall"}[add]
	res.set("file", p).set("changed", changed).set("dry_run", r.dryRun)
	if secret != "" {
		res.set("secret_from", []string{inbox.EnvNATSPassword, inbox.EnvNATSPasswordFile})
	}
	if r.dryRun {
		res.set("diff", lineDiff(p, old, updated))
		res.human = func(w io.Writer) {
			if !changed {
				fmt.Fprintf(w, "%s: nothing to %s\n", p, verb)
				return
			}
			io.WriteString(w, lineDiff(p, old, updated))
		}
		return res, nil
	}
	if changed {
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return nil, inbox.Storage(err, "create %s", filepath.Dir(target))
		}
		mode := os.FileMode(0o600)
		if fi, err := os.Stat(target); err == nil {
			mode = fi.Mode().Perm()
			if err := writeFileDurably(p+".bak", old, mode); err != nil {
				return nil, inbox.Storage(err, "back up %s", p)
			}
			res.set("backup", p+".bak")
		}
		if err := writeFileDurably(target, updated, mode); err != nil {
			return nil, inbox.Storage(err, "write %s", target)
		}
	}
	res.human = func(w io.Writer) {
		switch {
		case !changed:
			fmt.Fprintf(w, "%s: inbox's %s hooks are already %sed\n", p, tool, verb)
		case add:
			fmt.Fprintf(w, "%s: added inbox's hooks (%s)\n", p, strings.Join(eventNamesList(tool), ", "))
		default:
			fmt.Fprintf(w, "%s: removed inbox's hooks\n", p)
		}
		if add && tool == "codex" {
			fmt.Fprintln(w, "Codex runs hooks only with [features] codex_hooks = true in its config.toml.")
		}
		if add && agent == "" {
			fmt.Fprintln(w, "The hooks take the agent from INBOX_AGENT in the tool's environment (or install with --agent NAME).")
		}
		if secret != "" {
			fmt.Fprintf(w, "The hooks name the store without its password: they take it from %s, or from the file only you can read that %s names, in the tool's environment (or use a NATS credentials file: creds=FILE in the URL).\n",
				inbox.EnvNATSPassword, inbox.EnvNATSPasswordFile)
		}
	}
	return res, nil
}

// linkTarget follows p while it is a symlink and returns the file it ends
// at (p itself when it is none), whether that exists or not.
func linkTarget(p string) (string, error) {
	for range 40 {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		if err != nil {
			return "", err
		}
		dest, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(dest) {
			// Relative to the link's directory as the system finds it
			// (.. after a symlinked directory is not lexical).
			dir, err := filepath.EvalSymlinks(filepath.Dir(p))
			if err != nil {
				return "", err
			}
			dest = filepath.Join(dir, dest)
		}
		p = dest
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", p)
}

// writeFileDurably replaces p with data atomically, by a file written in
// p's own directory and renamed over it, and makes the rename durable.
func writeFileDurably(p string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(p)
	if err := renameio.WriteFile(p, data, perm, renameio.WithTempDir(dir)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// lineDiff shows what changes, line by line, around the common start and
// end of the two texts.
func lineDiff(name string, a, b []byte) string {
	al, bl := strings.SplitAfter(string(a), "\n"), strings.SplitAfter(string(b), "\n")
	i := 0
	for i < len(al) && i < len(bl) && al[i] == bl[i] {
		i++
	}
	j := 0
	for j < len(al)-i && j < len(bl)-i && al[len(al)-1-j] == bl[len(bl)-1-j] {
		j++
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n@@ line %d @@\n", name, name, i+1)
	for _, l := range al[i : len(al)-j] {
		out.WriteString("-" + strings.TrimRight(l, "\n") + "\n")
	}
	for _, l := range bl[i : len(bl)-j] {
		out.WriteString("+" + strings.TrimRight(l, "\n") + "\n")
	}
	return out.String()
}
