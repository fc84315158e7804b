package hub

import (
	"context"
	"sync"
)

// Lazy is a versioned value whose content is built when it is read: a
// producer that changes often and whose value is large (the monitor, with
// tens of thousands of targets whose states move during one probe round)
// only marks each change with Touch, and the value is built by the first
// Load of a version, from a source read after the version was, so that
// what Load returns is at least as new as the version it names. Wait is
// as lossless as Value's. Make one with NewLazy.
type Lazy[T any] struct {
	signal
	build func() T

	buildMu  sync.Mutex // one build at a time
	built    T
	builtVer uint64
	has      bool
}

// NewLazy returns a Lazy at version 0 whose value build returns. build
// must read its source as it is when called; it is called without any
// lock of the Lazy's held but build, one call at a time.
func NewLazy[T any](build func() T) *Lazy[T] { return &Lazy[T]{build: build} }

// Touch says the source changed: it makes the next version and wakes
// every Wait. It must be called after the change can be read.
func (x *Lazy[T]) Touch() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.bumpLocked()
}

// Load returns the value and the version it is at least as new as. The
// value of a version is built once and shared: it must not be modified.
func (x *Lazy[T]) Load() (T, uint64) {
	ver := x.Version()
	x.buildMu.Lock()
	defer x.buildMu.Unlock()
	if x.has && x.builtVer >= ver {
		return x.built, x.builtVer
	}
	ver = x.Version() // a build waited for may be older than a Touch since
	v := x.build()
	x.built, x.builtVer, x.has = v, ver, true
	return v, ver
}

// Wait returns the value and its version as soon as the version is above
// after, or ctx's error when ctx is done first.
func (x *Lazy[T]) Wait(ctx context.Context, after uint64) (T, uint64, error) {
	return wait(ctx, &x.signal, after, x.Load)
}
