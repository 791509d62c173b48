// Package jsonedit edits JSON text in place, so that everything an edit
// does not touch stays byte for byte as it was: key order, spacing,
// indentation, escapes and number spellings. A Doc parses the text into
// nodes that know their byte spans; an edit splices text in or out of
// those spans, and Bytes applies the edits.
//
// It is what inbox uses to merge its entries into another tool's settings
// file, which the tool's user may have formatted by hand.
//
// # Guarantees
//
// Bytes outside the spans an edit names are never changed. Appended
// members and elements go on lines of their own, indented one step (the
// Doc's Unit) deeper than the line their container starts on.
//
// # Caveats
//
// The text must be strict JSON (RFC 8259): comments and trailing commas
// are refused as ErrInvalid, never dropped. Parse does not check that an
// object's keys are unique; Get finds the first. The edits given to one
// Doc must not overlap, and the text given to Append and Replace is
// inserted as it is: its validity is the caller's to ensure.
package jsonedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// ErrInvalid is returned by Parse when the text is not valid JSON.
var ErrInvalid = errors.New("not valid JSON")

// Kind is what a Node holds.
type Kind byte

const (
	// Object is a JSON object: its Members are set.
	Object Kind = '{'
	// Array is a JSON array: its Elems are set.
	Array Kind = '['
	// Scalar is a string, number, true, false or null.
	Scalar Kind = 'v'
)

// Node is one JSON value and where it is in the text: text[Start:End].
type Node struct {
	Kind       Kind
	Start, End int
	Members    []Member // an Object's members, in order
	Elems      []*Node  // an Array's elements, in order
}

// Member is an object member: its key (decoded), where the member starts
// (its key's opening quote) and its value.
type Member struct {
	Key      string
	KeyStart int
	Value    *Node
}

// Get returns the value of n's first member named key, or nil (also when n
// is not an Object).
func (n *Node) Get(key string) *Node {
	for _, m := range n.Members {
		if m.Key == key {
			return m.Value
		}
	}
	return nil
}

// Len is how many members or elements n has.
func (n *Node) Len() int { return len(n.Members) + len(n.Elems) }

// itemStart and itemEnd are where n's member or element i starts (a
// member at its key) and ends (after its value).
func (n *Node) itemStart(i int) int {
	if n.Kind == Object {
		return n.Members[i].KeyStart
	}
	return n.Elems[i].Start
}

func (n *Node) itemEnd(i int) int {
	if n.Kind == Object {
		return n.Members[i].Value.End
	}
	return n.Elems[i].End
}

// Doc is a JSON text being edited.
type Doc struct {
	// Root is the text's top-level value.
	Root *Node
	// Unit is the text's indentation step, guessed from its first
	// indented line (two spaces when none is).
	Unit  string
	src   []byte
	edits []edit
}

// edit is one splice of the text: [start, end) becomes text.
type edit struct {
	start, end int
	text       string
}

// Parse parses src, which Doc keeps and never modifies. It returns
// ErrInvalid when src is not valid JSON.
func Parse(src []byte) (*Doc, error) {
	if !json.Valid(src) {
		return nil, ErrInvalid
	}
	p := &parser{s: src}
	return &Doc{Root: p.value(), Unit: indentUnit(src), src: src}, nil
}

// Raw is the text of n as it stands in the original.
func (d *Doc) Raw(n *Node) []byte { return d.src[n.Start:n.End] }

// Append adds items (each a member "key": value of an Object, or an
// element of an Array, as JSON text) at the end of container c, as one
// splice: each on a line of its own, one Unit deeper than the line c
// starts on, with the lines of a multi-line item indented to match.
func (d *Doc) Append(c *Node, items ...string) {
	if len(items) == 0 {
		return
	}
	outer := lineIndent(d.src, c.Start)
	inner := outer + d.Unit
	parts := make([]string, len(items))
	for i, t := range items {
		parts[i] = strings.ReplaceAll(t, "\n", "\n"+inner)
	}
	body := strings.Join(parts, ",\n"+inner)
	if n := c.Len(); n > 0 {
		last := c.itemEnd(n - 1)
		d.edits = append(d.edits, edit{start: last, end: last, text: ",\n" + inner + body})
		return
	}
	d.edits = append(d.edits, edit{start: c.Start + 1, end: c.End - 1, text: "\n" + inner + body + "\n" + outer})
}

// Remove takes out the members or elements idxs (ascending) of container
// c, each with the comma and the space that separate it from its
// neighbours; neighbouring ones go in one splice. Removing them all leaves
// the container empty ({} or []).
func (d *Doc) Remove(c *Node, idxs ...int) {
	if len(idxs) == 0 {
		return
	}
	if len(idxs) == c.Len() {
		d.edits = append(d.edits, edit{start: c.Start + 1, end: c.End - 1})
		return
	}
	for r := 0; r < len(idxs); {
		i, j := idxs[r], idxs[r]
		for r+1 < len(idxs) && idxs[r+1] == j+1 {
			r++
			j = idxs[r]
		}
		r++
		if i == 0 {
			// The first ones: up to where the next one starts.
			d.edits = append(d.edits, edit{start: c.itemStart(0), end: c.itemStart(j + 1)})
		} else {
			// Others: from the end of the one before.
			d.edits = append(d.edits, edit{start: c.itemEnd(i - 1), end: c.itemEnd(j)})
		}
	}
}

// Replace replaces the value n with text.
func (d *Doc) Replace(n *Node, text string) {
	d.edits = append(d.edits, edit{start: n.Start, end: n.End, text: text})
}

// Bytes returns the text with every edit made so far applied; the Doc's
// nodes still describe the original text.
func (d *Doc) Bytes() []byte {
	edits := slices.Clone(d.edits)
	// Later edits first, so that earlier offsets stay right.
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	out := append([]byte(nil), d.src...)
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

// indentUnit guesses the text's indentation step (default two spaces).
func indentUnit(s []byte) string {
	for _, line := range strings.Split(string(s), "\n") {
		trimmed := strings.TrimLeftFunc(line, unicode.IsSpace)
		if trimmed != "" && len(trimmed) < len(line) {
			return line[:len(line)-len(trimmed)]
		}
	}
	return "  "
}

// parser reads a text already known to be valid JSON.
type parser struct {
	s   []byte
	pos int
}

func (p *parser) ws() {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

// value parses one value and the space before it.
func (p *parser) value() *Node {
	p.ws()
	n := &Node{Start: p.pos}
	switch p.s[p.pos] {
	case '{':
		n.Kind = Object
		p.items('}', func() {
			keyStart := p.pos
			key := p.str()
			p.ws()
			p.pos++ // ':'
			n.Members = append(n.Members, Member{Key: key, KeyStart: keyStart, Value: p.value()})
		})
	case '[':
		n.Kind = Array
		p.items(']', func() { n.Elems = append(n.Elems, p.value()) })
	case '"':
		n.Kind = Scalar
		p.str()
	default:
		n.Kind = Scalar
		for p.pos < len(p.s) && strings.IndexByte(",]} \t\r\n", p.s[p.pos]) < 0 {
			p.pos++
		}
	}
	n.End = p.pos
	return n
}

// items reads a container's items, from its opening bracket to its
// closing one, calling item at the start of each.
func (p *parser) items(closing byte, item func()) {
	p.pos++
	for {
		p.ws()
		switch p.s[p.pos] {
		case closing:
			p.pos++
			return
		case ',':
			p.pos++
		default:
			item()
		}
	}
}

// str reads a string and returns it decoded.
func (p *parser) str() string {
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
	json.Unmarshal(p.s[start:p.pos], &out) // valid: checked by Parse
	return out
}
