//go:build race

package daemon

// raceScale multiplies a bound in time a test asserts: the race detector
// slows the code down several times. A bound a fixed version meets
// without -race it meets scaled under it; a fault the bound catches
// (an answer that never comes) is caught either way.
const raceScale = 4
