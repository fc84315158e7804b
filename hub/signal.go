package hub

import "sync"

// signal is the version of a value and the channel that tells its
// waiters it moved: what Value and Lazy share.
type signal struct {
	mu      sync.Mutex
	ver     uint64
	changed chan struct{} // closed and replaced by every bump
}

// bumpLocked makes the next version and wakes every waiter; s.mu held.
func (s *signal) bumpLocked() uint64 {
	s.ver++
	if s.changed != nil {
		close(s.changed)
	}
	s.changed = make(chan struct{})
	return s.ver
}

// Version returns the latest version.
func (s *signal) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ver
}

// Changed returns a channel that is closed once the version is above
// after: already closed when it is. It lets one goroutine wait for
// several values in one select.
func (s *signal) Changed(after uint64) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ver > after {
		c := make(chan struct{})
		close(c)
		return c
	}
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}
