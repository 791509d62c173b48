package cli

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
)

// The task output generator: "emit SIZE SEED CODE" on stdin makes the
// helper write SIZE bytes of text (or, with a negative SEED, binary) drawn
// from SEED, then exit with CODE. The test computes the same bytes.

// taskOutput writes the output of a task with this spec to w.
func taskOutput(w io.Writer, size int64, seed int64) error {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789 \n{}\"\\é✓"
	bw := bufio.NewWriterSize(w, 1<<16)
	var buf [4096]byte
	for size > 0 {
		n := min(int64(len(buf)), size)
		chunk := buf[:0]
		if seed < 0 {
			for int64(len(chunk)) < n {
				chunk = append(chunk, byte(r.Uint32()))
			}
		} else {
			for int64(len(chunk)) < n {
				c := letters[r.IntN(len(letters))]
				if c >= 0x80 || int64(len(chunk))+4 > n {
					c = 'x' // multi-byte letters only where they fit whole
				}
				chunk = append(chunk, c)
			}
		}
		if _, err := bw.Write(chunk); err != nil {
			return err
		}
		size -= n
	}
	return bw.Flush()
}

func emitHelper() {
	var size, seed int64
	var code int
	if _, err := fmt.Fscan(os.Stdin, &size, &seed, &code); err != nil {
		fmt.Fprintln(os.Stderr, "emit: want SIZE SEED CODE on stdin:", err)
		os.Exit(2)
	}
	if err := taskOutput(os.Stdout, size, seed); err != nil {
		os.Exit(3)
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "emit: failing as asked")
	}
	os.Exit(code)
}
