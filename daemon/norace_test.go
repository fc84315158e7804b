//go:build !race

package daemon

// raceScale multiplies a bound in time a test asserts (see race_test.go).
const raceScale = 1
