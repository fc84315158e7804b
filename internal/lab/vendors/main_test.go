package vendors

import (
	"testing"

	"lbdns/testkit/leakcheck"
)

// TestMain fails the package if process waiters or upstream server
// goroutines are still running after every test cleaned up (a waiter ends
// only when its product process has exited).
func TestMain(m *testing.M) {
	leakcheck.Main(m, "miekg/dns.(*Server)", "vendors.(*Process)")
}
