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

import "context"

// Value is a versioned value of type T. Version 0 is the zero value,
// before the first Publish; every Publish makes the next version. The
// values published must not be modified afterwards: readers share them.
// Make one with NewValue.
type Value[T any] struct {
	signal // guards v with its mutex
	v      T
}

// NewValue returns a Value at version 0 holding the zero T.
func NewValue[T any]() *Value[T] { return &Value[T]{} }

// Publish makes v the latest version and returns its number. It wakes
// every Wait and closes every channel Changed handed out.
func (x *Value[T]) Publish(v T) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.v = v
	return x.bumpLocked()
}

// Load returns the latest value and its version.
func (x *Value[T]) Load() (T, uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.v, x.ver
}

// Wait returns the latest value and its version as soon as the version is
// above after (at once when it already is), or ctx's error when ctx is
// done first.
func (x *Value[T]) Wait(ctx context.Context, after uint64) (T, uint64, error) {
	return wait(ctx, &x.signal, after, x.Load)
}

// wait waits for s to move above after, then loads.
func wait[T any](ctx context.Context, s *signal, after uint64, load func() (T, uint64)) (T, uint64, error) {
	select {
	case <-s.Changed(after):
		v, ver := load()
		return v, ver, nil
	case <-ctx.Done():
		var zero T
		return zero, after, ctx.Err()
	}
}
