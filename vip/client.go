package vip

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
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
	return applyEach(m, ops)
}

// ClientCounts is the number of calls a CountingClient has passed on.
type ClientCounts struct {
	// Services and Destinations count the two kinds of reads.
	Services, Destinations int64
	// Writes counts every create, update and delete, those inside a
	// batch included.
	Writes int64
	// Batches counts ApplyBatch calls.
	Batches int64
}

// CountingClient wraps a Client and counts the calls made through it, for
// metrics and for tests that assert how much netlink traffic a change costs.
// It is safe for concurrent use if the wrapped Client is.
type CountingClient struct {
	c                             Client
	services, dests, wrs, batches atomic.Int64
}

// NewCountingClient returns a CountingClient over c.
func NewCountingClient(c Client) *CountingClient {
	return &CountingClient{c: c}
}

// Counts returns the counts so far.
func (c *CountingClient) Counts() ClientCounts {
	return ClientCounts{Services: c.services.Load(), Destinations: c.dests.Load(), Writes: c.wrs.Load(), Batches: c.batches.Load()}
}

// Services implements Client.
func (c *CountingClient) Services() ([]Service, error) {
	c.services.Add(1)
	return c.c.Services()
}

// Destinations implements Client.
func (c *CountingClient) Destinations(k ServiceKey) ([]Destination, error) {
	c.dests.Add(1)
	return c.c.Destinations(k)
}

// CreateService implements Client.
func (c *CountingClient) CreateService(s Service) error {
	c.wrs.Add(1)
	return c.c.CreateService(s)
}

// UpdateService implements Client.
func (c *CountingClient) UpdateService(s Service) error {
	c.wrs.Add(1)
	return c.c.UpdateService(s)
}

// DeleteService implements Client.
func (c *CountingClient) DeleteService(k ServiceKey) error {
	c.wrs.Add(1)
	return c.c.DeleteService(k)
}

// CreateDestination implements Client.
func (c *CountingClient) CreateDestination(k ServiceKey, d Destination) error {
	c.wrs.Add(1)
	return c.c.CreateDestination(k, d)
}

// UpdateDestination implements Client.
func (c *CountingClient) UpdateDestination(k ServiceKey, d Destination) error {
	c.wrs.Add(1)
	return c.c.UpdateDestination(k, d)
}

// DeleteDestination implements Client.
func (c *CountingClient) DeleteDestination(k ServiceKey, a netip.AddrPort) error {
	c.wrs.Add(1)
	return c.c.DeleteDestination(k, a)
}

// ApplyBatch implements BatchClient, counting one batch and a write per op.
// It passes the batch on if the wrapped Client is a BatchClient, and
// applies the ops one at a time otherwise.
func (c *CountingClient) ApplyBatch(ops []Op) []error {
	c.batches.Add(1)
	c.wrs.Add(int64(len(ops)))
	if bc, ok := c.c.(BatchClient); ok {
		return bc.ApplyBatch(ops)
	}
	return applyEach(c.c, ops)
}
