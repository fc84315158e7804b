package daemon

import (
	"testing"

	"lbdns/testkit/leakcheck"
)

// TestMain fails the package when a daemon's goroutines (monitor targets,
// event loop) outlive the test that started it.
func TestMain(m *testing.M) {
	leakcheck.Main(m, "lbdns/daemon.(*Daemon)", "lbdns/monitor.(*Monitor)", "lbdns/resolvers.(*Identifier)")
}
