package prefetch

import (
	"testing"

	"lbdns/testkit/leakcheck"
)

// TestMain fails the package when a runner's goroutines, a query, or a test
// server outlive the test that started them.
func TestMain(m *testing.M) { leakcheck.Main(m) }
