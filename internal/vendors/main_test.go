package vendors

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if process waiters or upstream server
// goroutines are still running after every test cleaned up (a waiter ends
// only when its product process has exited).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(3 * time.Second)
		for {
			leaked := leakedGoroutines()
			if leaked == "" {
				break
			}
			if time.Now().After(deadline) {
				os.Stderr.WriteString("leaked goroutines:\n" + leaked + "\n")
				code = 1
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	os.Exit(code)
}

func leakedGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "miekg/dns.(*Server)") || strings.Contains(g, "vendors.(*Process)") {
			leaked = append(leaked, g)
		}
	}
	return strings.Join(leaked, "\n\n")
}
