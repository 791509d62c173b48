package sha256_test

import (
	crypto "crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/inbox-dev/inbox/internal/sha256"
)

func TestVectors(t *testing.T) {
	// FIPS 180-4 examples and the usual long-message vector.
	for _, tc := range []struct{ in, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
		{strings.Repeat("a", 1000000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
	} {
		got := sha256.Sum([]byte(tc.in))
		if h := hex.EncodeToString(got[:]); h != tc.want {
			t.Errorf("Sum(%.20q…) = %s, want %s", tc.in, h, tc.want)
		}
	}
}

// TestMatchesCrypto compares every length from 0 to 300 (each padding
// case: tail under 56 bytes, 56 to 63, whole blocks) and some large
// inputs with crypto/sha256, whole and written in random pieces.
func TestMatchesCrypto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 70000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	lengths := []int{65536, 65535, 65537, 70000}
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		want := crypto.Sum256(buf[:n])
		if got := sha256.Sum(buf[:n]); got != want {
			t.Fatalf("length %d: got %x, want %x", n, got, want)
		}
		d := sha256.New()
		for p := buf[:n]; len(p) > 0; {
			k := min(len(p), r.IntN(130))
			d.Write(p[:k])
			p = p[k:]
		}
		if got := d.Sum(); got != want {
			t.Fatalf("length %d in pieces: got %x, want %x", n, got, want)
		}
	}
}

func FuzzSum(f *testing.F) {
	f.Add([]byte("abc"), uint8(3))
	f.Add(make([]byte, 55), uint8(0))
	f.Add(make([]byte, 56), uint8(7))
	f.Add(make([]byte, 64), uint8(63))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		want := crypto.Sum256(data)
		if got := sha256.Sum(data); got != want {
			t.Fatalf("got %x, want %x", got, want)
		}
		d := sha256.New()
		k := min(int(cut), len(data))
		d.Write(data[:k])
		d.Write(data[k:])
		if got := d.Sum(); got != want {
			t.Fatalf("split at %d: got %x, want %x", k, got, want)
		}
	})
}

func BenchmarkWrite(b *testing.B) {
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	d := sha256.New()
	for b.Loop() {
		d.Write(buf)
	}
}
