//go:build !long

package testproc

// Long is true in the long run (go test -tags long), which .ci/run runs
// as a step of its own: soaks and the big sizes. The README's go test
// ./... runs one meaningful size of each.
const Long = false
