package inbox

import (
	"math/rand/v2"
	"time"
)

// crockford is Crockford's base32 alphabet in lower case: no i, l, o, u.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns prefix followed by 26 characters: 48 bits of milliseconds
// since the Unix epoch and 80 random bits, in Crockford base32. Ids sort by
// creation time (to the millisecond) and need no central counter.
func NewID(prefix string, t time.Time) string {
	// math/rand/v2's global source is seeded by the runtime from the
	// operating system's randomness; ids need uniqueness, not secrecy, and
	// crypto/rand would add a fifth of a millisecond to every start-up.
	var r [10]byte
	x, y := rand.Uint64(), rand.Uint64()
	for i := 0; i < 8; i++ {
		r[i] = byte(x >> (8 * i))
	}
	r[8], r[9] = byte(y), byte(y>>8)
	return encodeID(prefix, t, r)
}

func encodeID(prefix string, t time.Time, r [10]byte) string {
	var b [26]byte
	ms := uint64(t.UnixMilli())
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
