package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func blockedHere(started, release chan struct{}) {
	close(started)
	<-release
}

func TestSettle(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	go blockedHere(started, release)
	<-started // a goroutine not yet run may not show its function yet
	err := settle(0, []string{"leakcheck.blockedHere"}, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "blockedHere") {
		t.Fatalf("settle with a blocked goroutine = %v, want a leak naming it", err)
	}
	close(release)
	if err := settle(0, []string{"leakcheck.blockedHere"}, 2*time.Second); err != nil {
		t.Fatalf("settle after release = %v", err)
	}
}
