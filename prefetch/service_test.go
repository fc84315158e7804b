package prefetch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/configs"

	"github.com/miekg/dns"
)

// serviceConfig is a configuration with resolvers a and b; %s is the
// [prefetch] table's extra keys, %s the [[prefetch.domain]] tables.
const serviceConfig = `
[[vip]]
name = "v4"
address = "192.0.2.53"
pool = "main"

[[pool]]
name = "main"
members = ["a", "b"]
check = "rec"

[[resolver]]
name = "a"
address = "198.51.100.1:53"
vendor = "other"

[[resolver]]
name = "b"
address = "198.51.100.2:53"
vendor = "other"

[check.rec]

[check.rec.dns]
zone = "lbdns.test"

[prefetch]
%s
%s
`

func serviceCfg(t *testing.T, limits, domains string) *configs.Config {
	t.Helper()
	cfg, err := configs.Parse([]byte(fmt.Sprintf(serviceConfig, limits, domains)), "service.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// entries returns the service's entries by key, and whether it runs.
func entries(s *Service) (map[string]Status, bool) {
	list, totals := s.Status()
	if (list == nil) != (totals == nil) {
		panic("Status: entries and totals disagree on whether a runner runs")
	}
	m := map[string]Status{}
	for _, st := range list {
		m[st.Key.String()] = st
	}
	return m, totals != nil
}

// TestServiceLifecycle drives a Service through the configurations a
// daemon sees, on a fake clock, against caches with a TTL of a minute:
// every query made within the test beyond the first per entry comes from
// a restart, not from the schedule.
func TestServiceLifecycle(t *testing.T) {
	const www = `[[prefetch.domain]]
name = "www.example."
types = ["A", "AAAA"]
`
	const wwwA = `[[prefetch.domain]]
name = "www.example."
types = ["A"]
`
	synctest.Test(t, func(t *testing.T) {
		fc := newFakeCache(60)
		s := NewService(ServiceOptions{Query: fc.query, Rand: func(time.Duration) time.Duration { return 0 }})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		queries := func(k string) int {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			for key, n := range fc.queries {
				if key.String() == k {
					return n
				}
			}
			return 0
		}
		const aA, aAAAA, bA = "www.example./A@a", "www.example./AAAA@a", "www.example./A@b"

		// Known before any runner: handed to the first one.
		s.SetHealthy(map[string]bool{"a": true})
		s.Configure(serviceCfg(t, "", www)) // before Start: nothing runs
		if _, running := entries(s); running {
			t.Fatal("runner started before Start")
		}
		s.Start(ctx, serviceCfg(t, "", ""))
		if _, running := entries(s); running {
			t.Fatal("runner started for a config without domains")
		}

		s.Configure(serviceCfg(t, "", www))
		synctest.Wait()
		m, running := entries(s)
		if !running || len(m) != 4 {
			t.Fatalf("after a config with domains: running %v, %d entries, want 4", running, len(m))
		}
		if queries(aA) != 1 || queries(aAAAA) != 1 || queries(bA) != 0 || m[bA].Healthy {
			t.Errorf("first queries: a/A %d, a/AAAA %d, b/A %d (healthy %v); want 1, 1, 0 (parked)",
				queries(aA), queries(aAAAA), queries(bA), m[bA].Healthy)
		}

		s.SetHealthy(map[string]bool{"a": true, "b": true})
		synctest.Wait()
		if queries(bA) != 1 {
			t.Errorf("b/A after b turned healthy: %d queries, want 1", queries(bA))
		}

		time.Sleep(time.Second)
		s.Configure(serviceCfg(t, "", wwwA)) // same limits: entries kept
		synctest.Wait()
		m, _ = entries(s)
		if len(m) != 2 || queries(aA) != 1 || m[aA].Counters.Queries != 1 {
			t.Errorf("update: %d entries, a/A %d queries (counted %d); want 2 entries, 1 query kept", len(m), queries(aA), m[aA].Counters.Queries)
		}

		s.Configure(serviceCfg(t, "max_qps = 50", wwwA)) // new limits: restart
		synctest.Wait()
		m, running = entries(s)
		if !running || len(m) != 2 || queries(aA) != 2 || queries(bA) != 2 || m[aA].Counters.Queries != 1 {
			t.Errorf("restart: running %v, %d entries, a/A %d queries (counted %d), b/A %d; want 2 entries scheduled afresh, both healthy",
				running, len(m), queries(aA), m[aA].Counters.Queries, queries(bA))
		}

		s.Configure(serviceCfg(t, "max_qps = 50", "")) // no domains: stop
		if _, running := entries(s); running {
			t.Error("runner still running after a config without domains")
		}
		s.Configure(serviceCfg(t, "max_qps = 50", wwwA)) // and back
		synctest.Wait()
		if _, running := entries(s); !running || queries(aA) != 3 {
			t.Errorf("restart after stop: running %v, a/A %d queries, want 3", running, queries(aA))
		}

		s.Stop()
		if _, running := entries(s); running {
			t.Error("runner still running after Stop")
		}
		s.Stop() // idempotent
		// synctest.Test fails if a runner goroutine is left.
	})
}

// TestServiceStopsWithContext checks that the runner stops when Start's
// context is done, and that Stop then returns.
func TestServiceStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := newFakeCache(60)
		s := NewService(ServiceOptions{Query: fc.query})
		ctx, cancel := context.WithCancel(t.Context())
		s.Start(ctx, serviceCfg(t, "", "[[prefetch.domain]]\nname = \"www.example.\"\n"))
		synctest.Wait()
		if _, running := entries(s); !running {
			t.Fatal("runner not started")
		}
		cancel()
		synctest.Wait()
		s.Stop()
	})
}

// TestServiceSubnetExpiry: an unbound resolver in window mode whose
// entries carry ECS: those entries run in expiry mode (unbound's subnet
// cache ignores prefetch), and the service says so in a warning at start
// and at every reload that keeps them; its entries without ECS keep the
// window.
func TestServiceSubnetExpiry(t *testing.T) {
	const doms = `[[prefetch.domain]]
name = "www.example."
ecs = ["eu"]

[[prefetch.domain]]
name = "api.example."

[[prefetch.partition]]
name = "eu"
address = "192.0.2.1"
`
	cfgWith := func(vendor, refresh string) *configs.Config {
		doc := strings.Replace(fmt.Sprintf(serviceConfig, "", doms), `address = "198.51.100.1:53"
vendor = "other"`, `address = "198.51.100.1:53"
vendor = "`+vendor+`"
refresh = "`+refresh+`"`, 1)
		cfg, err := configs.Parse([]byte(doc), "service.toml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if got := SubnetExpiry(cfgWith("unbound", "window")); !slices.Equal(got, []string{"a"}) {
		t.Errorf("SubnetExpiry(unbound window) = %v, want [a]", got)
	}
	for _, c := range [][2]string{{"unbound", "expiry"}, {"bind", "window"}, {"powerdns", "window"}} {
		if got := SubnetExpiry(cfgWith(c[0], c[1])); got != nil {
			t.Errorf("SubnetExpiry(%s %s) = %v, want none", c[0], c[1], got)
		}
	}
	modes := map[Key]Mode{}
	for _, sp := range Specs(cfgWith("unbound", "window")) {
		if sp.Key.Resolver == "a" {
			modes[sp.Key] = sp.Policy.Mode
		}
	}
	if m := modes[Key{"www.example.", dns.TypeA, "a", "eu"}]; m != Expiry {
		t.Errorf("www/A@a/eu mode %s, want expiry", m)
	}
	if m := modes[Key{"api.example.", dns.TypeA, "a", ""}]; m != Window {
		t.Errorf("api/A@a (no ECS) mode %s, want window", m)
	}

	synctest.Test(t, func(t *testing.T) {
		var logs strings.Builder
		fc := newFakeCache(60)
		s := NewService(ServiceOptions{Query: fc.query, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s.SetHealthy(map[string]bool{"a": true, "b": true})
		s.Start(ctx, cfgWith("unbound", "window"))
		synctest.Wait()
		warnings := func() int {
			return strings.Count(logs.String(), "level=WARN msg=\"prefetch: ECS entries of unbound resolvers in window mode run in expiry mode")
		}
		if n := warnings(); n != 1 || !strings.Contains(logs.String(), "resolvers=[a]") {
			t.Errorf("start: %d warnings, want 1 naming a:\n%s", n, logs.String())
		}
		m, _ := entries(s)
		if st := m["www.example./A@a/eu"]; st.Mode != Expiry {
			t.Errorf("status of www/A@a/eu: mode %s, want expiry", st.Mode)
		}
		s.Configure(cfgWith("unbound", "window"))
		if n := warnings(); n != 2 {
			t.Errorf("reload: %d warnings in all, want 2", n)
		}
		s.Configure(cfgWith("unbound", "expiry"))
		if n := warnings(); n != 2 {
			t.Errorf("reload to expiry: %d warnings in all, want still 2", n)
		}
		s.Stop()
	})
}
