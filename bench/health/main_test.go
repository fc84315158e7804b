package healthbench

import (
	"testing"

	"lbdns/internal/leakcheck"
)

// TestMain fails the package when goroutines outlive the tests: every
// responder, monitor and daemon a test or benchmark started must have
// stopped.
func TestMain(m *testing.M) { leakcheck.Main(m) }
