package inbox

// FindCycles is CyclesContext with its bounds (how many cycles, how many
// steps) given, for the tests of the bounds.
var FindCycles = findCycles
