// Package sha256 is SHA-256 (FIPS 180-4): the fingerprint of intake
// descriptors and the name of blobs in the store.
//
// It is written out here rather than taken from crypto/sha256 because
// every inbox command is a process of its own: importing crypto/sha256
// links the FIPS 140 module, whose package initialisers ran at every
// start-up of every command and cost about 0.45 ms on the project's
// machine (a fifteenth of a whole fetch). The hash names and checks data;
// it protects no secret. The tests hold it to crypto/sha256.
package sha256

import (
	"encoding/binary"
	"encoding/hex"
)

// Size is the length of a digest in bytes.
const Size = 32

// Sum returns the SHA-256 digest of data.
func Sum(data []byte) [Size]byte {
	var d Digest
	d.Reset()
	d.Write(data)
	return d.Sum()
}

// Digest is a running SHA-256. The zero value must be Reset before use.
type Digest struct {
	h   [8]uint32
	buf [64]byte
	nb  int    // bytes in buf
	len uint64 // bytes written
}

// New returns a fresh running hash.
func New() *Digest {
	d := &Digest{}
	d.Reset()
	return d
}

// Reset starts the hash anew.
func (d *Digest) Reset() {
	d.h = [8]uint32{
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	}
	d.nb, d.len = 0, 0
}

// Write adds p to the hash; it never fails (it is an io.Writer).
func (d *Digest) Write(p []byte) (int, error) {
	n := len(p)
	d.len += uint64(n)
	if d.nb > 0 {
		c := copy(d.buf[d.nb:], p)
		d.nb += c
		p = p[c:]
		if d.nb < 64 {
			return n, nil
		}
		block(&d.h, d.buf[:])
		d.nb = 0
	}
	for len(p) >= 64 {
		block(&d.h, p[:64])
		p = p[64:]
	}
	d.nb = copy(d.buf[:], p)
	return n, nil
}

// Sum returns the digest of what was written so far; the hash goes on.
func (d *Digest) Sum() [Size]byte {
	h := d.h
	var tail [128]byte
	rest := copy(tail[:], d.buf[:d.nb])
	tail[rest] = 0x80
	end := 64
	if rest >= 56 {
		end = 128
	}
	binary.BigEndian.PutUint64(tail[end-8:end], d.len*8)
	for i := 0; i < end; i += 64 {
		block(&h, tail[i:i+64])
	}
	var out [Size]byte
	for i, v := range h {
		binary.BigEndian.PutUint32(out[4*i:], v)
	}
	return out
}

// Hex returns the digest of what was written so far in lower-case hex.
func (d *Digest) Hex() string {
	s := d.Sum()
	return hex.EncodeToString(s[:])
}

var k256 = [64]uint32{
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

func rotr(x uint32, n uint) uint32 { return x>>n | x<<(32-n) }

// block folds one 64-byte block into the state h.
func block(h *[8]uint32, p []byte) {
	var w [64]uint32
	for i := range 16 {
		w[i] = binary.BigEndian.Uint32(p[4*i:])
	}
	for i := 16; i < 64; i++ {
		s0 := rotr(w[i-15], 7) ^ rotr(w[i-15], 18) ^ w[i-15]>>3
		s1 := rotr(w[i-2], 17) ^ rotr(w[i-2], 19) ^ w[i-2]>>10
		w[i] = w[i-16] + s0 + w[i-7] + s1
	}
	a, b, c, d, e, f, g, hh := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
	for i := range 64 {
		t1 := hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + (e&f ^ ^e&g) + k256[i] + w[i]
		t2 := (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + (a&b ^ a&c ^ b&c)
		hh, g, f, e, d, c, b, a = g, f, e, d+t1, c, b, a, t1+t2
	}
	h[0] += a
	h[1] += b
	h[2] += c
	h[3] += d
	h[4] += e
	h[5] += f
	h[6] += g
	h[7] += hh
}
