package spool

// The checksummed-line codec (docs/FORMAT.md, "Checksummed lines"), exposed
// to the black-box fuzz tests in fuzz_test.go.
var (
	CheckLineForFuzz  = checkLine
	EncodeLineForFuzz = encodeLine
)
