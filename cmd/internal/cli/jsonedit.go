package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// Editing a settings file as text, so that everything that is not ours
// stays byte for byte as it was: the file is parsed into nodes that know
// their byte spans, and an edit splices text in or out.

// jnode is one JSON value and where it is in the text.
type jnode struct {
	kind       byte // '{', '[', or 'v' for anything else
	start, end int  // the value's bytes: text[start:end]
	members    []jmember
	elems      []*jnode
}

// jmember is an object member: its key (decoded) and where the member
// starts (its key's quote).
type jmember struct {
	key      string
	keyStart int
	val      *jnode
}

type jparser struct {
	s   []byte
	pos int
}

func parseJSONSpans(s []byte) (*jnode, error) {
	if !json.Valid(s) {
		return nil, fmt.Errorf("not valid JSON")
	}
	p := &jparser{s: s}
	n := p.value()
	return n, nil
}

func (p *jparser) ws() {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

// value parses one value (the text is known to be valid JSON).
func (p *jparser) value() *jnode {
	p.ws()
	n := &jnode{start: p.pos}
	switch p.s[p.pos] {
	case '{':
		n.kind = '{'
		p.pos++
		for {
			p.ws()
			if p.s[p.pos] == '}' {
				p.pos++
				break
			}
			if p.s[p.pos] == ',' {
				p.pos++
				continue
			}
			keyStart := p.pos
			key := p.str()
			p.ws()
			p.pos++ // ':'
			n.members = append(n.members, jmember{key: key, keyStart: keyStart, val: p.value()})
		}
	case '[':
		n.kind = '['
		p.pos++
		for {
			p.ws()
			if p.s[p.pos] == ']' {
				p.pos++
				break
			}
			if p.s[p.pos] == ',' {
				p.pos++
				continue
			}
			n.elems = append(n.elems, p.value())
		}
	case '"':
		n.kind = 'v'
		p.str()
	default:
		n.kind = 'v'
		for p.pos < len(p.s) && strings.IndexByte(",]} \t\r\n", p.s[p.pos]) < 0 {
			p.pos++
		}
	}
	n.end = p.pos
	return n
}

// str reads a string and returns it decoded.
func (p *jparser) str() string {
	start := p.pos
	p.pos++
	for p.s[p.pos] != '"' {
		if p.s[p.pos] == '\\' {
			p.pos++
		}
		p.pos++
	}
	p.pos++
	var out string
	json.Unmarshal(p.s[start:p.pos], &out)
	return out
}

func (n *jnode) member(key string) *jnode {
	for _, m := range n.members {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// edit is one splice of the text: [start, end) becomes text.
type edit struct {
	start, end int
	text       string
}

// apply applies non-overlapping edits.
func apply(s []byte, edits []edit) []byte {
	// Later edits first, so that earlier offsets stay right.
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].start > edits[j-1].start; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	out := append([]byte(nil), s...)
	for _, e := range edits {
		out = append(out[:e.start:e.start], append([]byte(e.text), out[e.end:]...)...)
	}
	return out
}

// lineIndent is the whitespace that starts the line holding offset i.
func lineIndent(s []byte, i int) string {
	ls := bytes.LastIndexByte(s[:i], '\n') + 1
	j := ls
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	return string(s[ls:j])
}

// indentUnit guesses the file's indentation step (default two spaces).
func indentUnit(s []byte) string {
	for _, line := range strings.Split(string(s), "\n") {
		trimmed := strings.TrimLeftFunc(line, unicode.IsSpace)
		if trimmed != "" && len(trimmed) < len(line) {
			return line[:len(line)-len(trimmed)]
		}
	}
	return "  "
}

// insertInto adds text (a member "k": v, or an element) at the end of
// container c, on a line of its own indented one step deeper.
func insertInto(s []byte, c *jnode, text, unit string) edit {
	return insertAll(s, c, []string{text}, unit)
}

// insertAll adds several members or elements at the end of container c,
// as one splice.
func insertAll(s []byte, c *jnode, texts []string, unit string) edit {
	closeAt := c.end - 1 // the closing bracket
	inner := lineIndent(s, c.start) + unit
	var parts []string
	for _, t := range texts {
		parts = append(parts, indentText(t, inner))
	}
	body := strings.Join(parts, ",\n"+inner)
	n := len(c.members) + len(c.elems)
	if n == 0 {
		return edit{start: c.start + 1, end: closeAt, text: "\n" + inner + body + "\n" + lineIndent(s, c.start)}
	}
	var last int
	if c.kind == '{' {
		last = c.members[n-1].val.end
	} else {
		last = c.elems[n-1].end
	}
	return edit{start: last, end: last, text: ",\n" + inner + body}
}

// indentText indents every line of text but the first by prefix.
func indentText(text, prefix string) string {
	return strings.ReplaceAll(text, "\n", "\n"+prefix)
}

// removeFrom removes element or member i of container c, with the comma
// and whitespace that separate it from its neighbours.
func removeFrom(s []byte, c *jnode, i int) edit {
	start := func(k int) int {
		if c.kind == '{' {
			return c.members[k].keyStart
		}
		return c.elems[k].start
	}
	end := func(k int) int {
		if c.kind == '{' {
			return c.members[k].val.end
		}
		return c.elems[k].end
	}
	n := len(c.members) + len(c.elems)
	switch {
	case n == 1:
		return edit{start: c.start + 1, end: c.end - 1, text: ""}
	case i == 0:
		return edit{start: start(0), end: start(1), text: ""}
	default:
		return edit{start: end(i - 1), end: end(i), text: ""}
	}
}

// removeMany removes the elements or members idxs (ascending) of
// container c, merging neighbouring ones into one splice each.
func removeMany(s []byte, c *jnode, idxs []int) []edit {
	n := len(c.members) + len(c.elems)
	if len(idxs) == 0 {
		return nil
	}
	if len(idxs) == n {
		return []edit{{start: c.start + 1, end: c.end - 1, text: ""}}
	}
	start := func(k int) int {
		if c.kind == '{' {
			return c.members[k].keyStart
		}
		return c.elems[k].start
	}
	end := func(k int) int {
		if c.kind == '{' {
			return c.members[k].val.end
		}
		return c.elems[k].end
	}
	var out []edit
	for r := 0; r < len(idxs); {
		i, j := idxs[r], idxs[r]
		for r+1 < len(idxs) && idxs[r+1] == j+1 {
			r++
			j = idxs[r]
		}
		r++
		if i == 0 {
			out = append(out, edit{start: start(0), end: start(j + 1), text: ""})
		} else {
			out = append(out, edit{start: end(i - 1), end: end(j), text: ""})
		}
	}
	return out
}
