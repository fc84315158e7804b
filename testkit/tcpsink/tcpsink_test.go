package tcpsink

import (
	"net"
	"testing"
	"time"
)

// TestUpDown: connects work while up, are refused while down, and work
// again once up.
func TestUpDown(t *testing.T) {
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = s.ln.Addr().String() // the port picked, for Up again
	defer s.Down()
	dial := func() error {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("up: %v", err)
	}
	s.Down()
	if err := dial(); err == nil {
		t.Fatal("down: the connect worked")
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
