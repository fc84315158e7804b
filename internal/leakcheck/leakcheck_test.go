package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func blockedHere(release chan struct{}) { <-release }

func TestSettle(t *testing.T) {
	release := make(chan struct{})
	go blockedHere(release)
	err := settle(0, []string{"leakcheck.blockedHere"}, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "blockedHere") {
		t.Fatalf("settle with a blocked goroutine = %v, want a leak naming it", err)
	}
	close(release)
	if err := settle(0, []string{"leakcheck.blockedHere"}, 2*time.Second); err != nil {
		t.Fatalf("settle after release = %v", err)
	}
}
