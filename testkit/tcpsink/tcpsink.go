// Package tcpsink is a TCP listener for tests that accepts every
// connection and closes it at once: a health-check target that a test
// brings up and down (a GSLB member that lives and dies).
package tcpsink

import (
	"fmt"
	"net"
	"sync"
	"testing"
)

// Sink is a TCP listener at one address, up or down.
type Sink struct {
	addr string

	mu sync.Mutex
	ln net.Listener // nil while down
}

// Listen opens a sink at addr ("127.0.0.2:8080"; "0.0.0.0:P" takes
// every local address, loopback ones included).
func Listen(addr string) (*Sink, error) {
	s := &Sink{addr: addr}
	if err := s.Up(); err != nil {
		return nil, err
	}
	return s, nil
}

// Up listens again (nothing when it listens).
func (s *Sink) Up() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("tcpsink: %w", err)
	}
	s.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return nil
}

// Down closes the listener: connects to it are refused.
func (s *Sink) Down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
		s.ln = nil
	}
}

// ListenT is Listen for a test: it fails t on an error and closes the
// sink when t ends.
func ListenT(t testing.TB, addr string) *Sink {
	t.Helper()
	s, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Down)
	return s
}
