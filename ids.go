package inbox

import (
	"math/rand/v2"
	"sync"
	"time"
)

// crockford is Crockford's base32 alphabet in lower case: no i, l, o, u.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// monotonicSpan is how far behind the last id's time a new id's may be
// and still come after it (taking its time): a caller that read the clock
// just before another goroutine made an id, or a clock stepped back a
// little. A time further back makes an id of its own time.
const monotonicSpan = time.Second

// last is the id this process made last: its milliseconds and random
// part (NewID).
var last struct {
	sync.Mutex
	ms uint64
	r  [10]byte
}

// NewID returns prefix followed by 26 characters: 48 bits of milliseconds
// since the Unix epoch and 80 random bits, in Crockford base32. Ids sort by
// creation time (to the millisecond) and need no central counter. Within
// a process they sort in the order they were made: an id made in the
// millisecond of the one before it (or up to monotonicSpan before it)
// takes that id's time and its random part plus one, as ULID's monotonic
// mode does, so that threads made in one millisecond are still handed out
// oldest first. Ids of other processes stay apart by their random parts.
func NewID(prefix string, t time.Time) string {
	ms := uint64(t.UnixMilli())
	last.Lock()
	if ms <= last.ms && last.ms-ms <= uint64(monotonicSpan/time.Millisecond) {
		ms = last.ms
		if !increment(&last.r) {
			ms++ // the random part ran out: the next millisecond
			last.r = randomPart()
		}
	} else {
		last.r = randomPart()
	}
	last.ms = ms
	r := last.r
	last.Unlock()
	return encode(prefix, ms, r)
}

// randomPart is 80 random bits. math/rand/v2's global source is seeded
// by the runtime from the operating system's randomness; ids need
// uniqueness, not secrecy, and crypto/rand would add a fifth of a
// millisecond to every start-up.
func randomPart() [10]byte {
	var r [10]byte
	x, y := rand.Uint64(), rand.Uint64()
	for i := 0; i < 8; i++ {
		r[i] = byte(x >> (8 * i))
	}
	r[8], r[9] = byte(y), byte(y>>8)
	return r
}

// increment adds one to r (big-endian), reporting false when it was all
// ones (r is then all zeros).
func increment(r *[10]byte) bool {
	for i := len(r) - 1; i >= 0; i-- {
		r[i]++
		if r[i] != 0 {
			return true
		}
	}
	return false
}

func encode(prefix string, ms uint64, r [10]byte) string {
	var b [26]byte
	for i := 9; i >= 0; i-- {
		b[i] = crockford[ms&31]
		ms >>= 5
	}
	// 80 bits -> 16 characters of 5 bits.
	var acc uint64
	bits := 0
	j := 10
	for _, x := range r {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			b[j] = crockford[(acc>>uint(bits))&31]
			j++
		}
	}
	return prefix + string(b[:])
}
