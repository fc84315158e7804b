// Package vipfake holds test helpers around vip's Client: a CountingClient
// that counts the calls made through it, for tests and benchmarks that
// assert how much netlink traffic a change costs. It lives apart from vip so
// that production code carries no test helpers.
package vipfake

import (
	"net/netip"
	"sync/atomic"

	"lbdns/vip"
)

// The CountingClient is a vip.BatchClient.
var _ vip.BatchClient = (*CountingClient)(nil)

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

// CountingClient wraps a vip.Client and counts the calls made through it, for
// tests that assert how much netlink traffic a change costs.
// It is safe for concurrent use if the wrapped vip.Client is.
type CountingClient struct {
	c                             vip.Client
	services, dests, wrs, batches atomic.Int64
}

// NewCountingClient returns a CountingClient over c.
func NewCountingClient(c vip.Client) *CountingClient {
	return &CountingClient{c: c}
}

// Counts returns the counts so far.
func (c *CountingClient) Counts() ClientCounts {
	return ClientCounts{Services: c.services.Load(), Destinations: c.dests.Load(), Writes: c.wrs.Load(), Batches: c.batches.Load()}
}

// Services implements vip.Client.
func (c *CountingClient) Services() ([]vip.Service, error) {
	c.services.Add(1)
	return c.c.Services()
}

// Destinations implements vip.Client.
func (c *CountingClient) Destinations(k vip.ServiceKey) ([]vip.Destination, error) {
	c.dests.Add(1)
	return c.c.Destinations(k)
}

// CreateService implements vip.Client.
func (c *CountingClient) CreateService(s vip.Service) error {
	c.wrs.Add(1)
	return c.c.CreateService(s)
}

// UpdateService implements vip.Client.
func (c *CountingClient) UpdateService(s vip.Service) error {
	c.wrs.Add(1)
	return c.c.UpdateService(s)
}

// DeleteService implements vip.Client.
func (c *CountingClient) DeleteService(k vip.ServiceKey) error {
	c.wrs.Add(1)
	return c.c.DeleteService(k)
}

// CreateDestination implements vip.Client.
func (c *CountingClient) CreateDestination(k vip.ServiceKey, d vip.Destination) error {
	c.wrs.Add(1)
	return c.c.CreateDestination(k, d)
}

// UpdateDestination implements vip.Client.
func (c *CountingClient) UpdateDestination(k vip.ServiceKey, d vip.Destination) error {
	c.wrs.Add(1)
	return c.c.UpdateDestination(k, d)
}

// DeleteDestination implements vip.Client.
func (c *CountingClient) DeleteDestination(k vip.ServiceKey, a netip.AddrPort) error {
	c.wrs.Add(1)
	return c.c.DeleteDestination(k, a)
}

// ApplyBatch implements vip.BatchClient, counting one batch and a write per op.
// It passes the batch on if the wrapped vip.Client is a vip.BatchClient, and
// applies the ops one at a time otherwise.
func (c *CountingClient) ApplyBatch(ops []vip.Op) []error {
	c.batches.Add(1)
	c.wrs.Add(int64(len(ops)))
	if bc, ok := c.c.(vip.BatchClient); ok {
		return bc.ApplyBatch(ops)
	}
	return vip.ApplyEach(c.c, ops)
}
