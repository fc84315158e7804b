//go:build !race

package flood

// raceOn is set under the race detector (see race_test.go).
const raceOn = false
