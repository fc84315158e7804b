package report

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"lbdns/vip"
)

// StatsMaxAge is how long a StatsCache reuses kernel statistics: a
// dashboard that polls /status and /metrics every second costs one kernel
// dump a second.
const StatsMaxAge = time.Second

// StatsCache keeps the last per-destination statistics read from the
// kernel, for StatsMaxAge. It is safe for concurrent use.
type StatsCache struct {
	reader vip.StatsReader
	now    func() time.Time
	log    *slog.Logger

	mu   sync.Mutex
	at   time.Time
	data Stats
	// failing is set while reads fail, so that the failure is logged once.
	failing bool
}

// NewStatsCache returns a cache over r (nil: no statistics, as in dry-run
// or with a client that cannot read them), with the clock now; a failed
// read is logged to log once until reads succeed again.
func NewStatsCache(r vip.StatsReader, now func() time.Time, log *slog.Logger) *StatsCache {
	return &StatsCache{reader: r, now: now, log: log}
}

// Read returns the statistics of the services of applied, from the cache
// when it is younger than StatsMaxAge; nil when there is no reader or the
// read failed.
func (c *StatsCache) Read(ctx context.Context, applied vip.Table) Stats {
	if c == nil || c.reader == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.data != nil && now.Sub(c.at) < StatsMaxAge {
		return c.data
	}
	data, err := c.reader.DestStats(ctx, func(k vip.ServiceKey) bool { _, ok := applied[k]; return ok })
	if err != nil {
		if !c.failing {
			c.log.Warn("cannot read IPVS statistics", "err", err)
		}
		c.failing, c.data = true, nil
		return nil
	}
	c.failing, c.at, c.data = false, now, data
	return data
}
