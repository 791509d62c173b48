//go:build race

package cli

// raceEnabled: the binary under test carries the race detector, whose
// shadow memory makes its peak RSS say nothing of inbox's own.
const raceEnabled = true
