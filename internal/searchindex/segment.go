package searchindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
)

// The file (all integers little-endian):
//
//	header     72 bytes: magic "INBXSIX1", version u32, threads u32,
//	           docs u32, terms u32, covered event id i64, segment i64,
//	           offset i64, line checksum u32, base u32, thread bytes u32,
//	           term bytes u32, postings bytes u32, reserved u32
//	threadOff  (threads+1) × u32, offsets into thread bytes
//	threadBytes
//	docs       docs × 24 bytes: event id i64, created (Unix ms) i64,
//	           thread number u32, seq u32; ascending by event id
//	termOff    (terms+1) × u32, offsets into term bytes
//	termBytes  the terms, ascending
//	postOff    (terms+1) × u32, offsets into postings
//	lastDoc    terms × u32, each term's last doc number
//	postings   per term its doc numbers, ascending: the first as a
//	           uvarint, then each one's distance from the one before
//	checksum   u32, CRC-32C of every byte before it

const (
	magic     = "INBXSIX1"
	version   = 1
	headerLen = 72
	docLen    = 24
)

// castagnoli is the CRC-32C table, made on first use: made at package
// initialisation it cost every inbox command 0.2 ms (GODEBUG=inittrace=1),
// about 5 % of inbox --version.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// ErrDamaged is returned by Decode when data is not a whole index file of
// this version: cut short, its checksum wrong, or written by another
// version. The index is derived data: the caller rebuilds it.
var ErrDamaged = errors.New("search index damaged")

// Covered says how far into the event log an index file reaches: the
// last event whose messages it holds, where that event's line ends, and
// the CRC-32 of the line's body, so that a log whose line at that place
// is another (rolled back and written again after a crash, or moved away)
// is told from the one the index was made from.
type Covered struct {
	EventID int64
	Segment int64
	Offset  int64
	LineCRC uint32
}

// Meta is what a file says of itself besides its documents.
type Meta struct {
	Covered Covered
	// Base is, for a delta file, the checksum of the base file it adds
	// to; 0 for a base file.
	Base uint32
}

// Doc is one message the index holds.
type Doc struct {
	EventID  int64
	Created  int64 // Unix milliseconds (CreatedMilli)
	ThreadID string
	Seq      int
}

// Segment is an index file, decoded: it reads its terms and documents
// from the file's bytes, in place.
type Segment struct {
	Meta Meta
	// Sum is the file's checksum, which a delta names as its Base.
	Sum uint32

	data                    []byte
	nThreads, nDocs, nTerms int
	threadOff, threadBytes  int
	docs                    int
	termOff, termBytes      int
	postOff, lastDoc, posts int
}

// Len is the number of documents.
func (s *Segment) Len() int { return s.nDocs }

// Threads is the number of thread ids the file names.
func (s *Segment) Threads() int { return s.nThreads }

func u32(b []byte, at int) int { return int(binary.LittleEndian.Uint32(b[at:])) }
func i64(b []byte, at int) int64 {
	return int64(binary.LittleEndian.Uint64(b[at:]))
}

// Decode checks data and returns the segment it holds (which keeps data).
func Decode(data []byte) (*Segment, error) {
	if len(data) < headerLen+4 || string(data[:8]) != magic {
		return nil, fmt.Errorf("%w: not an index file", ErrDamaged)
	}
	if v := u32(data, 8); v != version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrDamaged, v, version)
	}
	body := data[:len(data)-4]
	if sum := binary.LittleEndian.Uint32(data[len(body):]); crc32.Checksum(body, castagnoli()) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrDamaged)
	}
	s := &Segment{data: body, Sum: binary.LittleEndian.Uint32(data[len(body):])}
	s.nThreads, s.nDocs, s.nTerms = u32(data, 12), u32(data, 16), u32(data, 20)
	s.Meta = Meta{Covered: Covered{EventID: i64(data, 24), Segment: i64(data, 32), Offset: i64(data, 40),
		LineCRC: binary.LittleEndian.Uint32(data[48:])}, Base: binary.LittleEndian.Uint32(data[52:])}
	tb, mb, pb := u32(data, 56), u32(data, 60), u32(data, 64)
	at := headerLen
	next := func(n int) int { p := at; at += n; return p }
	s.threadOff = next(4 * (s.nThreads + 1))
	s.threadBytes = next(tb)
	s.docs = next(docLen * s.nDocs)
	s.termOff = next(4 * (s.nTerms + 1))
	s.termBytes = next(mb)
	s.postOff = next(4 * (s.nTerms + 1))
	s.lastDoc = next(4 * s.nTerms)
	s.posts = next(pb)
	if at != len(body) {
		return nil, fmt.Errorf("%w: sections do not fill the file", ErrDamaged)
	}
	// Offsets ascend within their sections, so that no read leaves one.
	for _, o := range []struct{ at, n, limit int }{{s.threadOff, s.nThreads, tb}, {s.termOff, s.nTerms, mb}, {s.postOff, s.nTerms, pb}} {
		prev := 0
		for i := 0; i <= o.n; i++ {
			v := u32(body, o.at+4*i)
			if v < prev || v > o.limit || (i == 0 && v != 0) {
				return nil, fmt.Errorf("%w: offsets out of order", ErrDamaged)
			}
			prev = v
		}
	}
	for i := range s.nDocs {
		if u32(body, s.docs+docLen*i+16) >= s.nThreads {
			return nil, fmt.Errorf("%w: a document names no thread", ErrDamaged)
		}
	}
	return s, nil
}

func (s *Segment) thread(i int) string {
	return string(s.data[s.threadBytes+u32(s.data, s.threadOff+4*i) : s.threadBytes+u32(s.data, s.threadOff+4*i+4)])
}

func (s *Segment) term(i int) []byte {
	return s.data[s.termBytes+u32(s.data, s.termOff+4*i) : s.termBytes+u32(s.data, s.termOff+4*i+4)]
}

func (s *Segment) postings(i int) []byte {
	return s.data[s.posts+u32(s.data, s.postOff+4*i) : s.posts+u32(s.data, s.postOff+4*i+4)]
}

func (s *Segment) last(i int) uint32 { return uint32(u32(s.data, s.lastDoc+4*i)) }

// Doc returns document i.
func (s *Segment) Doc(i int) Doc {
	at := s.docs + docLen*i
	return Doc{EventID: i64(s.data, at), Created: i64(s.data, at+8), ThreadID: s.thread(u32(s.data, at+16)), Seq: u32(s.data, at+20)}
}

// EventID is document i's event id.
func (s *Segment) EventID(i int) int64 { return i64(s.data, s.docs+docLen*i) }

// find returns the number of term t, or -1.
func (s *Segment) find(t string) int {
	lo, hi := 0, s.nTerms
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if string(s.term(m)) < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < s.nTerms && string(s.term(lo)) == t {
		return lo
	}
	return -1
}

// Candidates returns, ascending, the documents that hold every one of
// terms (none when terms is empty).
func (s *Segment) Candidates(terms []string) []uint32 {
	if len(terms) == 0 {
		return nil
	}
	lists := make([][]byte, 0, len(terms))
	for _, t := range terms {
		i := s.find(t)
		if i < 0 {
			return nil
		}
		lists = append(lists, s.postings(i))
	}
	slices.SortFunc(lists, func(a, b []byte) int { return len(a) - len(b) })
	cands := decodeAll(lists[0], s.nDocs)
	for _, l := range lists[1:] {
		if len(cands) == 0 {
			break
		}
		cands = intersect(cands, l)
	}
	return cands
}

// reader walks a posting list.
type reader struct {
	p       []byte
	d       uint64
	started bool
}

// next returns the list's next number; false at its end.
func (r *reader) next() (uint64, bool) {
	v, k := binary.Uvarint(r.p)
	if k <= 0 {
		return 0, false
	}
	r.p = r.p[k:]
	if r.started {
		r.d += v
	} else {
		r.d, r.started = v, true
	}
	return r.d, true
}

// decodeAll decodes a posting list, keeping the numbers below n.
func decodeAll(p []byte, n int) []uint32 {
	out := make([]uint32, 0, len(p))
	r := reader{p: p}
	for d, ok := r.next(); ok && d < uint64(n); d, ok = r.next() {
		out = append(out, uint32(d))
	}
	return out
}

// intersect keeps the members of cands (ascending) that posting list p
// holds, reusing cands.
func intersect(cands []uint32, p []byte) []uint32 {
	out := cands[:0]
	r := reader{p: p}
	i := 0
	for d, ok := r.next(); ok && i < len(cands); d, ok = r.next() {
		for i < len(cands) && uint64(cands[i]) < d {
			i++
		}
		if i < len(cands) && uint64(cands[i]) == d {
			out = append(out, cands[i])
			i++
		}
	}
	return out
}

// Terms lists the segment's terms and their documents, for checks and
// tests.
func (s *Segment) Terms(fn func(term string, docs []uint32)) {
	for i := range s.nTerms {
		fn(string(s.term(i)), decodeAll(s.postings(i), s.nDocs))
	}
}

// IsFilterTerm reports whether a term is one FilterTerms makes rather
// than a word.
func IsFilterTerm(t string) bool { return strings.HasPrefix(t, "\x00") }
