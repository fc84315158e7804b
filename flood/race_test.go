//go:build race

package flood

// raceOn is set under the race detector, whose shadow memory and
// slowness make a heap measure of millions of keys meaningless.
const raceOn = true
