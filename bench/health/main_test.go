package healthbench

import (
	"testing"

	"lbdns/testkit/leakcheck"
)

// TestMain fails the package when goroutines outlive the tests: every
// responder, monitor and daemon a test or benchmark started must have
// stopped.
func TestMain(m *testing.M) { leakcheck.Main(m) }
