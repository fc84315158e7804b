// Package hub is where lbdnsd's parts share state: typed, versioned values
// (the configuration, the facts of every monitor target, the operator
// intent and its revision, the resolver pools' plan, the GSLB pools'
// states, the serving verdicts and the responder's state). A producer
// publishes a new version of a value; a consumer loads the latest version,
// or waits for one newer than the last it read. Waiting is lossless: a
// consumer that falls behind sees several changes coalesced into the
// latest value, but it never misses that something changed, whatever the
// rate. The package does no I/O and keeps no goroutine.
package hub

import (
	"context"
	"sync"
)

// Value is a versioned value of type T. Version 0 is the zero value,
// before the first Publish; every Publish makes the next version. The
// values published must not be modified afterwards: readers share them.
// The zero Value is not ready for use; make one with NewValue.
type Value[T any] struct {
	mu  sync.Mutex
	v   T
	ver uint64
	// changed is closed and replaced by every Publish.
	changed chan struct{}
}

// NewValue returns a Value at version 0 holding the zero T.
func NewValue[T any]() *Value[T] {
	return &Value[T]{changed: make(chan struct{})}
}

// Publish makes v the latest version and returns its number. It wakes
// every Wait and closes every channel Changed handed out.
func (x *Value[T]) Publish(v T) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.v = v
	x.ver++
	close(x.changed)
	x.changed = make(chan struct{})
	return x.ver
}

// Load returns the latest value and its version.
func (x *Value[T]) Load() (T, uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.v, x.ver
}

// Version returns the latest version.
func (x *Value[T]) Version() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ver
}

// Changed returns a channel that is closed once the version is above
// after: already closed when it is. It lets one goroutine wait for
// several values in one select.
func (x *Value[T]) Changed(after uint64) <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ver > after {
		c := make(chan struct{})
		close(c)
		return c
	}
	return x.changed
}

// Wait returns the latest value and its version as soon as the version is
// above after (at once when it already is), or ctx's error when ctx is
// done first.
func (x *Value[T]) Wait(ctx context.Context, after uint64) (T, uint64, error) {
	select {
	case <-x.Changed(after):
		v, ver := x.Load()
		return v, ver, nil
	case <-ctx.Done():
		var zero T
		return zero, after, ctx.Err()
	}
}
