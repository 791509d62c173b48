package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestSum256Vectors(t *testing.T) {
	// FIPS 180-4 examples and the usual long-message vector.
	for _, tc := range []struct{ in, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
		{strings.Repeat("a", 1000000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
	} {
		got := sum256([]byte(tc.in))
		if h := hex.EncodeToString(got[:]); h != tc.want {
			t.Errorf("sum256(%.20q…) = %s, want %s", tc.in, h, tc.want)
		}
	}
}

// TestSum256MatchesCrypto compares every length from 0 to 300 (each
// padding case: tail under 56 bytes, 56 to 63, whole blocks) and some
// large inputs with crypto/sha256.
func TestSum256MatchesCrypto(t *testing.T) {
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
		if got, want := sum256(buf[:n]), sha256.Sum256(buf[:n]); got != want {
			t.Fatalf("length %d: got %x, want %x", n, got, want)
		}
	}
}

func FuzzSum256(f *testing.F) {
	f.Add([]byte("abc"))
	f.Add(make([]byte, 55))
	f.Add(make([]byte, 56))
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := sum256(data), sha256.Sum256(data); got != want {
			t.Fatalf("got %x, want %x", got, want)
		}
	})
}
