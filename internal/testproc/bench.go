package testproc

import "testing"

// BenchEncode measures encode appending v's encoding to a reused buffer,
// reporting the encoding's size as bytes per operation and the
// allocations.
func BenchEncode[T any](b *testing.B, v *T, encode func(*T, []byte) []byte) {
	buf := encode(v, nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = encode(v, buf[:0])
	}
}

// BenchDecode measures decode reading data into a zero T each time,
// reporting data's size as bytes per operation and the allocations. It
// fails the benchmark when decode does.
func BenchDecode[T any](b *testing.B, data []byte, decode func(*T, []byte) error) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var v T
	for b.Loop() {
		var zero T
		v = zero
		if err := decode(&v, data); err != nil {
			b.Fatal(err)
		}
	}
}
