// Package testlog gives tests a log sink that a logger writes while the
// test reads it.
package testlog

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer safe for a logger writing and a test reading at
// once. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Count returns how many slog text lines carry msg="MSG".
func (s *Buffer) Count(msg string) int {
	return strings.Count(s.String(), fmt.Sprintf("msg=%q", msg))
}
