// Command abtime times whole command lines, alternating them trial by
// trial so that drift on a noisy machine hits each alike, and prints each
// one's median, 90th percentile and the ratios of the first one's median
// to the others'. Each time runs from just before fork/exec to the end of
// wait, as compare.sh's single-command rows do.
//
//	go run ./bench/abtime N CMD ARGS... [:: CMD ARGS...]...
//
// In arguments, %i becomes the trial number and @@FILE the trial's line
// of FILE (line i modulo the number of lines), so that each trial can act
// on a thread of its own:
//
//	go run ./bench/abtime 300 \
//	  ../shared/bench/bin/sqlite-inbox claim --db sq.db --json --agent X --thread @@sq.txt :: \
//	  bin/inbox claim --db st --json --agent X --thread @@st.txt
//
// bench/threads.sh makes such files.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: abtime N CMD ARGS... [:: CMD ARGS...]...")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "abtime: N must be a positive number, not %q\n", os.Args[1])
		os.Exit(2)
	}
	var cmds [][]string
	cur := []string{}
	for _, a := range os.Args[2:] {
		if a == "::" {
			cmds = append(cmds, cur)
			cur = []string{}
			continue
		}
		cur = append(cur, a)
	}
	cmds = append(cmds, cur)
	times := make([][]time.Duration, len(cmds))
	failed := make([]int, len(cmds))
	for i := range n {
		for c, args := range cmds {
			a := make([]string, len(args))
			for j, x := range args {
				if file, ok := strings.CutPrefix(x, "@@"); ok {
					a[j] = lineOf(file, i)
				} else {
					a[j] = strings.ReplaceAll(x, "%i", strconv.Itoa(i))
				}
			}
			cmd := exec.Command(a[0], a[1:]...)
			t0 := time.Now()
			err := cmd.Run()
			d := time.Since(t0)
			if err != nil {
				failed[c]++
			}
			times[c] = append(times[c], d)
		}
	}
	var medians []time.Duration
	for c, ts := range times {
		slices.Sort(ts)
		med, p90 := ts[len(ts)/2], ts[len(ts)*9/10]
		medians = append(medians, med)
		fmt.Printf("%8.3f ms p50  %8.3f ms p90  %d failed  %s\n", ms(med), ms(p90), failed[c], strings.Join(cmds[c], " "))
	}
	for c := 1; c < len(medians); c++ {
		fmt.Printf("median of command 1 / median of command %d = %.2f\n", c+1, float64(medians[0])/float64(medians[c]))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

var lines = map[string][]string{}

func lineOf(file string, i int) string {
	l, ok := lines[file]
	if !ok {
		data, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintf(os.Stderr, "abtime: %v\n", err)
			os.Exit(2)
		}
		l = strings.Fields(string(data))
		if len(l) == 0 {
			fmt.Fprintf(os.Stderr, "abtime: %s is empty\n", file)
			os.Exit(2)
		}
		lines[file] = l
	}
	return l[i%len(l)]
}
