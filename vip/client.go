package vip

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
)

// ErrIPVSUnavailable is wrapped by the errors returned when the kernel's
// IPVS cannot be used: the module is not loaded, the process lacks
// CAP_NET_ADMIN, or the platform is not Linux.
var ErrIPVSUnavailable = errors.New("vip: ipvs unavailable")

// Client is the part of the IPVS table the reconciler needs. Errors follow
// the os conventions: creating what exists fails with an error that is
// os.ErrExist, and touching what does not exist with one that is
// os.ErrNotExist.
type Client interface {
	// Services lists the virtual services with their identity and
	// scheduler only (Dests nil). An empty table is an empty slice, not an
	// error.
	Services() ([]Service, error)
	// Destinations lists the destinations of one service.
	Destinations(ServiceKey) ([]Destination, error)

	CreateService(Service) error
	UpdateService(Service) error
	DeleteService(ServiceKey) error

	CreateDestination(ServiceKey, Destination) error
	UpdateDestination(ServiceKey, Destination) error
	DeleteDestination(ServiceKey, netip.AddrPort) error
}

// MemClient is an in-memory Client: the table of a dry run, and a stand-in
// for the kernel in tests. It is safe for concurrent use.
type MemClient struct {
	mu sync.Mutex
	t  Table
}

// NewMemClient returns an empty MemClient.
func NewMemClient() *MemClient {
	return &MemClient{t: make(Table)}
}

// Table returns a deep copy of the client's table.
func (m *MemClient) Table() Table {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t.Clone()
}

// Services implements Client, in key order.
func (m *MemClient) Services() ([]Service, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Service, 0, len(m.t))
	for _, k := range m.t.Keys() {
		out = append(out, Service{Key: k, Scheduler: m.t[k].Scheduler})
	}
	return out, nil
}

// Destinations implements Client, in address order.
func (m *MemClient) Destinations(k ServiceKey) ([]Destination, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.t[k]
	if !ok {
		return nil, fmt.Errorf("vip: service %s: %w", k, os.ErrNotExist)
	}
	out := make([]Destination, 0, len(s.Dests))
	for _, d := range s.Dests {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Destination) int { return a.Addr.Compare(b.Addr) })
	return out, nil
}

// CreateService implements Client.
func (m *MemClient) CreateService(s Service) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.t[s.Key]; ok {
		return fmt.Errorf("vip: service %s: %w", s.Key, os.ErrExist)
	}
	m.t[s.Key] = Service{Key: s.Key, Scheduler: s.Scheduler, Dests: make(map[netip.AddrPort]Destination)}
	return nil
}

// UpdateService implements Client.
func (m *MemClient) UpdateService(s Service) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.t[s.Key]
	if !ok {
		return fmt.Errorf("vip: service %s: %w", s.Key, os.ErrNotExist)
	}
	cur.Scheduler = s.Scheduler
	m.t[s.Key] = cur
	return nil
}

// DeleteService implements Client; the service's destinations go with it.
func (m *MemClient) DeleteService(k ServiceKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.t[k]; !ok {
		return fmt.Errorf("vip: service %s: %w", k, os.ErrNotExist)
	}
	delete(m.t, k)
	return nil
}

// CreateDestination implements Client.
func (m *MemClient) CreateDestination(k ServiceKey, d Destination) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.t[k]
	if !ok {
		return fmt.Errorf("vip: service %s: %w", k, os.ErrNotExist)
	}
	if _, ok := s.Dests[d.Addr]; ok {
		return fmt.Errorf("vip: service %s: destination %s: %w", k, d.Addr, os.ErrExist)
	}
	s.Dests[d.Addr] = d
	return nil
}

// UpdateDestination implements Client.
func (m *MemClient) UpdateDestination(k ServiceKey, d Destination) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.t[k]
	if !ok {
		return fmt.Errorf("vip: service %s: %w", k, os.ErrNotExist)
	}
	if _, ok := s.Dests[d.Addr]; !ok {
		return fmt.Errorf("vip: service %s: destination %s: %w", k, d.Addr, os.ErrNotExist)
	}
	s.Dests[d.Addr] = d
	return nil
}

// DeleteDestination implements Client.
func (m *MemClient) DeleteDestination(k ServiceKey, a netip.AddrPort) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.t[k]
	if !ok {
		return fmt.Errorf("vip: service %s: %w", k, os.ErrNotExist)
	}
	if _, ok := s.Dests[a]; !ok {
		return fmt.Errorf("vip: service %s: destination %s: %w", k, a, os.ErrNotExist)
	}
	delete(s.Dests, a)
	return nil
}

// ApplyBatch implements BatchClient one op at a time.
func (m *MemClient) ApplyBatch(ops []Op) []error {
	return ApplyEach(m, ops)
}
