package probes

import (
	"testing"

	"lbdns/testkit/leakcheck"
)

// TestMain fails the package when goroutines outlive the tests: every probe
// and every test server must have stopped all it started.
func TestMain(m *testing.M) { leakcheck.Main(m) }
