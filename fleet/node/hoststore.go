package node

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"lbdns/intent"
)

// HostStore is the intent store of a host in a fleet: the intent the
// fleet shares (GSLB switches, TTL raises, the cluster's overrides) in
// the fleet's store, and the host's own drain (lbctl host drain: this
// host's route announcements only) in the host's file, where it
// survives restarts and no other host's write can undo it. The
// revisions are the shared store's.
type HostStore struct {
	shared intent.Store
	local  *intent.FileStore

	mu sync.Mutex
	// file is the local file's state and revision as last read or
	// written: its Host is the drain in force, the rest is kept as it
	// was (a file from before the fleet).
	file intent.Stored
	// last is the shared store's latest revision seen (loaded, saved
	// or watched): a save that changes only the drain does not write it.
	last intent.Stored
}

var _ intent.Store = (*HostStore)(nil)

// NewHostStore returns the store of a host whose shared intent is kept
// in shared (the fleet's) and whose drain in local (the host's file).
func NewHostStore(shared intent.Store, local *intent.FileStore) *HostStore {
	return &HostStore{shared: shared, local: local}
}

// seen records st, of the shared store, when it is the latest.
func (s *HostStore) seen(st intent.Stored) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Revision >= s.last.Revision {
		st.State = st.State.Clone()
		s.last = st
	}
}

// withHost returns st with the drain in force.
func (s *HostStore) withHost(st intent.Stored) intent.Stored {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.State.Host = s.file.State.Clone().Host
	return st
}

// Load reads both stores.
func (s *HostStore) Load(ctx context.Context) (intent.Stored, error) {
	f, err := s.local.Load(ctx)
	if err != nil {
		return intent.Stored{}, fmt.Errorf("the host's drain: %w", err)
	}
	s.mu.Lock()
	s.file = f
	s.mu.Unlock()
	st, err := s.shared.Load(ctx)
	if err != nil {
		return intent.Stored{}, err
	}
	s.seen(st)
	return s.withHost(st), nil
}

// Save saves the shared intent in the fleet's store (unless only the
// drain changed), then the host's drain in its file when it changed.
func (s *HostStore) Save(ctx context.Context, st intent.State, expected intent.Revision) (intent.Revision, error) {
	shared := st.Clone()
	shared.Host = nil
	s.mu.Lock()
	same := expected == s.last.Revision && reflect.DeepEqual(shared, s.last.State)
	s.mu.Unlock()
	rev := expected
	if !same { // the fleet's intent changed, not only the drain
		var err error
		rev, err = s.shared.Save(ctx, shared, expected)
		if err != nil {
			var ce *intent.ConflictError
			if errors.As(err, &ce) {
				ce.Current = s.withHost(intent.Stored{State: ce.Current}).State
			}
			return rev, err
		}
		s.seen(intent.Stored{State: shared, Revision: rev})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if reflect.DeepEqual(st.Host, s.file.State.Host) {
		return rev, nil
	}
	next := s.file.State.Clone()
	next.Host = st.Clone().Host
	frev, err := s.local.Save(ctx, next, s.file.Revision)
	if err != nil {
		return rev, fmt.Errorf("save the host's drain: %w", err)
	}
	s.file = intent.Stored{State: next, Revision: frev}
	return rev, nil
}

// Watch delivers the shared store's revisions with the drain in force.
func (s *HostStore) Watch(ctx context.Context) <-chan intent.Stored {
	in := s.shared.Watch(ctx)
	out := make(chan intent.Stored)
	go func() {
		defer close(out)
		for st := range in {
			s.seen(st)
			select {
			case out <- s.withHost(st):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
