package control

import (
	"testing"

	"lbdns/testkit/leakcheck"
)

// TestMain fails the package when a server, a stream or a waiter outlives
// the test that started it.
func TestMain(m *testing.M) { leakcheck.Main(m) }
