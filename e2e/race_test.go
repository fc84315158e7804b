//go:build race

package e2e

// raceBuild is set when the tests run with -race: the binaries under test
// are then built with the race detector too.
const raceBuild = true
