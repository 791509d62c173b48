package searchindex

import (
	"cmp"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"strings"
)

// Builder collects documents and their terms in memory, in any order.
type Builder struct {
	docs  []Doc
	terms map[string][]uint32 // term → the documents (numbers in docs) that hold it
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{terms: map[string][]uint32{}} }

// Add files d under terms (MessageTerms: sorted, without repeats).
func (b *Builder) Add(d Doc, terms []string) {
	n := uint32(len(b.docs))
	b.docs = append(b.docs, d)
	for _, t := range terms {
		b.terms[t] = append(b.terms[t], n)
	}
}

// AddSegment adds every document of s, under its terms.
func (b *Builder) AddSegment(s *Segment) {
	base := uint32(len(b.docs))
	for i := range s.nDocs {
		b.docs = append(b.docs, s.Doc(i))
	}
	s.Terms(func(t string, docs []uint32) {
		l := b.terms[t]
		for _, d := range docs {
			l = append(l, base+d)
		}
		b.terms[t] = l
	})
}

// Len is the number of documents added.
func (b *Builder) Len() int { return len(b.docs) }

// ErrTooLarge is returned when an index would not fit the file's 32-bit
// offsets (4 GiB of terms or postings).
var ErrTooLarge = errors.New("search index too large")

// Encode returns the file holding the documents added, in event order.
func (b *Builder) Encode(meta Meta) ([]byte, error) {
	order := make([]uint32, len(b.docs)) // position in the file → number in b.docs
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(x, y uint32) int { return compareDocs(&b.docs[x], &b.docs[y]) })
	pos := make([]uint32, len(b.docs)) // number in b.docs → position in the file
	for p, i := range order {
		pos[i] = uint32(p)
	}
	var w writer
	threads := map[string]uint32{}
	for _, i := range order {
		d := &b.docs[i]
		t, ok := threads[d.ThreadID]
		if !ok {
			t = uint32(len(w.threads))
			threads[d.ThreadID] = t
			w.threads = append(w.threads, d.ThreadID)
		}
		w.docs = append(w.docs, fileDoc{d.EventID, d.Created, t, uint32(d.Seq)})
	}
	terms := make([]string, 0, len(b.terms))
	for t := range b.terms {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	var buf []uint32
	for _, t := range terms {
		buf = buf[:0]
		for _, i := range b.terms[t] {
			buf = append(buf, pos[i])
		}
		slices.Sort(buf)
		w.addTerm(t, nil, 0, buf)
	}
	return w.encode(meta)
}

// compareDocs orders documents as the file holds them: by event id, then
// thread and seq.
func compareDocs(a, b *Doc) int {
	return cmp.Or(cmp.Compare(a.EventID, b.EventID), strings.Compare(a.ThreadID, b.ThreadID), cmp.Compare(a.Seq, b.Seq))
}

// Merge returns the file holding a's documents, then b's (which must come
// after them in event order): a's postings are copied as they are, and
// of b's only each list's first number is written anew.
//
// When b's first document comes before a's last (a message whose event
// was written again after a crash, under a later id), both are decoded
// and encoded anew in order.
func Merge(a, b *Segment, meta Meta) ([]byte, error) {
	if a.nDocs > 0 && b.nDocs > 0 {
		x, y := a.Doc(a.nDocs-1), b.Doc(0)
		if compareDocs(&y, &x) < 0 {
			bl := NewBuilder()
			bl.AddSegment(a)
			bl.AddSegment(b)
			return bl.Encode(meta)
		}
	}
	var w writer
	threads := make(map[string]uint32, a.nThreads)
	for i := range a.nThreads {
		t := a.thread(i)
		threads[t] = uint32(i)
		w.threads = append(w.threads, t)
	}
	for i := range a.nDocs {
		at := a.docs + docLen*i
		w.docs = append(w.docs, fileDoc{i64(a.data, at), i64(a.data, at+8), uint32(u32(a.data, at+16)), uint32(u32(a.data, at+20))})
	}
	remap := make([]uint32, b.nThreads)
	for i := range b.nThreads {
		t := b.thread(i)
		n, ok := threads[t]
		if !ok {
			n = uint32(len(w.threads))
			threads[t] = n
			w.threads = append(w.threads, t)
		}
		remap[i] = n
	}
	for i := range b.nDocs {
		at := b.docs + docLen*i
		w.docs = append(w.docs, fileDoc{i64(b.data, at), i64(b.data, at+8), remap[u32(b.data, at+16)], uint32(u32(b.data, at+20))})
	}
	shift := uint32(a.nDocs)
	i, j := 0, 0
	for i < a.nTerms || j < b.nTerms {
		var c int
		switch {
		case i == a.nTerms:
			c = 1
		case j == b.nTerms:
			c = -1
		default:
			c = strings.Compare(string(a.term(i)), string(b.term(j)))
		}
		switch {
		case c < 0:
			w.addRaw(string(a.term(i)), a.postings(i), a.last(i))
			i++
		case c > 0:
			w.addShifted(string(b.term(j)), nil, 0, b.postings(j), shift, b.last(j))
			j++
		default:
			w.addShifted(string(a.term(i)), a.postings(i), a.last(i), b.postings(j), shift, b.last(j))
			i++
			j++
		}
	}
	return w.encode(meta)
}

// fileDoc is a document as the file holds it.
type fileDoc struct {
	eventID, created int64
	thread, seq      uint32
}

// writer lays out a file.
type writer struct {
	threads []string
	docs    []fileDoc
	terms   []string
	postOff []int // into posts, per term; one more at the end once encoded
	last    []uint32
	posts   []byte
}

// addTerm adds a term whose postings are prefix (a list ending at
// prefixLast) followed by docs.
func (w *writer) addTerm(t string, prefix []byte, prefixLast uint32, docs []uint32) {
	w.terms = append(w.terms, t)
	w.postOff = append(w.postOff, len(w.posts))
	w.posts = append(w.posts, prefix...)
	prev, first := prefixLast, len(prefix) == 0
	for _, d := range docs {
		if first {
			w.posts = binary.AppendUvarint(w.posts, uint64(d))
			first = false
		} else {
			w.posts = binary.AppendUvarint(w.posts, uint64(d-prev))
		}
		prev = d
	}
	w.last = append(w.last, prev)
}

// addRaw adds a term with an encoded posting list.
func (w *writer) addRaw(t string, p []byte, last uint32) { w.addTerm(t, p, last, nil) }

// addShifted adds a term whose postings are prefix (ending at prefixLast)
// followed by the encoded list p with shift added to every number.
func (w *writer) addShifted(t string, prefix []byte, prefixLast uint32, p []byte, shift, last uint32) {
	v, k := binary.Uvarint(p)
	if k <= 0 {
		w.addTerm(t, prefix, prefixLast, nil)
		return
	}
	w.addTerm(t, prefix, prefixLast, []uint32{uint32(v) + shift})
	w.posts = append(w.posts, p[k:]...)
	w.last[len(w.last)-1] = last + shift
}

func (w *writer) encode(meta Meta) ([]byte, error) {
	tb, mb := 0, 0
	for _, t := range w.threads {
		tb += len(t)
	}
	for _, t := range w.terms {
		mb += len(t)
	}
	if tb > math.MaxUint32 || mb > math.MaxUint32 || len(w.posts) > math.MaxUint32 || len(w.docs) > math.MaxUint32 {
		return nil, ErrTooLarge
	}
	size := headerLen + 4*(len(w.threads)+1) + tb + docLen*len(w.docs) + 4*(len(w.terms)+1) + mb +
		4*(len(w.terms)+1) + 4*len(w.terms) + len(w.posts) + 4
	out := make([]byte, 0, size)
	le := binary.LittleEndian
	out = append(out, magic...)
	for _, v := range []int{version, len(w.threads), len(w.docs), len(w.terms)} {
		out = le.AppendUint32(out, uint32(v))
	}
	c := meta.Covered
	out = le.AppendUint64(out, uint64(c.EventID))
	out = le.AppendUint64(out, uint64(c.Segment))
	out = le.AppendUint64(out, uint64(c.Offset))
	out = le.AppendUint32(out, c.LineCRC)
	out = le.AppendUint32(out, meta.Base)
	for _, v := range []int{tb, mb, len(w.posts), 0} {
		out = le.AppendUint32(out, uint32(v))
	}
	out = appendStrings(out, w.threads)
	for _, d := range w.docs {
		out = le.AppendUint64(out, uint64(d.eventID))
		out = le.AppendUint64(out, uint64(d.created))
		out = le.AppendUint32(out, d.thread)
		out = le.AppendUint32(out, d.seq)
	}
	out = appendStrings(out, w.terms)
	for _, o := range w.postOff {
		out = le.AppendUint32(out, uint32(o))
	}
	out = le.AppendUint32(out, uint32(len(w.posts)))
	for _, l := range w.last {
		out = le.AppendUint32(out, l)
	}
	out = append(out, w.posts...)
	return le.AppendUint32(out, crc32.Checksum(out, castagnoli())), nil
}

// appendStrings appends a table of strings: their end offsets after a
// 0, then their bytes.
func appendStrings(out []byte, ss []string) []byte {
	off := 0
	out = binary.LittleEndian.AppendUint32(out, 0)
	for _, t := range ss {
		off += len(t)
		out = binary.LittleEndian.AppendUint32(out, uint32(off))
	}
	for _, t := range ss {
		out = append(out, t...)
	}
	return out
}
