package report

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/vip"
)

// fakeStats counts reads and answers with the statistics of the services
// the caller owns, or with err.
type fakeStats struct {
	reads int
	err   error
	all   Stats
}

func (f *fakeStats) DestStats(_ context.Context, owned func(vip.ServiceKey) bool) (map[vip.ServiceKey]map[netip.AddrPort]vip.DestStats, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	out := Stats{}
	for k, v := range f.all {
		if owned(k) {
			out[k] = v
		}
	}
	return out, nil
}

func TestStatsCache(t *testing.T) {
	now := t0
	clock := func() time.Time { return now }
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	f := &fakeStats{all: Stats{
		v1UDP: {drAddr("a"): {Conns: 1}},
		v2UDP: {addr["a"]: {Conns: 2}},
	}}
	c := NewStatsCache(f, clock, log)
	applied := vip.Table{v1UDP: {Key: v1UDP}}
	ctx := context.Background()

	got := c.Read(ctx, applied)
	if f.reads != 1 || len(got) != 1 || got[v1UDP][drAddr("a")].Conns != 1 {
		t.Fatalf("first read: %d reads, %v (only the applied services)", f.reads, got)
	}
	now = now.Add(StatsMaxAge - time.Millisecond)
	if c.Read(ctx, applied); f.reads != 1 {
		t.Errorf("read again within StatsMaxAge: %d reads", f.reads)
	}
	now = now.Add(time.Millisecond)
	if c.Read(ctx, applied); f.reads != 2 {
		t.Errorf("not read again after StatsMaxAge: %d reads", f.reads)
	}

	f.err = errors.New("netlink says no")
	for range 3 {
		now = now.Add(StatsMaxAge)
		if got := c.Read(ctx, applied); got != nil {
			t.Errorf("failed read returned %v, want nil", got)
		}
	}
	if n := strings.Count(logs.String(), "cannot read IPVS statistics"); n != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", n, logs.String())
	}
	f.err = nil
	if got := c.Read(ctx, applied); got == nil {
		t.Error("no statistics after reads recovered")
	}
	f.err = errors.New("again")
	now = now.Add(StatsMaxAge)
	c.Read(ctx, applied)
	if n := strings.Count(logs.String(), "cannot read IPVS statistics"); n != 2 {
		t.Errorf("a new failure after a recovery logged %d times in all, want 2", n)
	}

	t.Run("no reader", func(t *testing.T) {
		if got := NewStatsCache(nil, clock, log).Read(ctx, applied); got != nil {
			t.Errorf("got %v", got)
		}
		var nilCache *StatsCache
		if got := nilCache.Read(ctx, applied); got != nil {
			t.Errorf("nil cache: %v", got)
		}
	})
}
