package prefetch

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/internal/lab/dnstest"

	"github.com/miekg/dns"
)

// fakeCache is an expiry-mode resolver cache in memory: each key's entry
// lives ttl whole seconds from the second it was fetched.
type fakeCache struct {
	mu      sync.Mutex
	ttl     int
	expires map[Key]int64 // unix second at which the entry is gone
	fetches map[Key]int
	queries map[Key]int
	fail    map[string]bool
}

func newFakeCache(ttl int) *fakeCache {
	return &fakeCache{ttl: ttl, expires: map[Key]int64{}, fetches: map[Key]int{}, queries: map[Key]int{}, fail: map[string]bool{}}
}

func (f *fakeCache) query(_ context.Context, sp Spec) Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries[sp.Key]++
	if f.fail[sp.Key.Resolver] {
		return Outcome{Detail: "rcode SERVFAIL"}
	}
	now := time.Now().Unix()
	if exp, ok := f.expires[sp.Key]; ok && now < exp {
		return Outcome{OK: true, TTL: time.Duration(exp-now) * time.Second}
	}
	f.expires[sp.Key] = now + int64(f.ttl)
	f.fetches[sp.Key]++
	return Outcome{OK: true, TTL: time.Duration(f.ttl) * time.Second}
}

// TestRunnerKeepsWarmAndStops runs a runner for five seconds of a fake
// clock (testing/synctest) against expiry-mode caches with a TTL of two
// seconds, without jitter, so every query time is known: healthy
// resolvers are fetched at 0, at 2.05 and at 4.05 (expiry plus
// ExpiryMargin), a failing one is retried after 1 and 2 more seconds
// (MinBackoff doubling, at 0, 1 and 3), an unhealthy one is never asked.
func TestRunnerKeepsWarmAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := newFakeCache(2)
		fc.fail["bad"] = true
		r := New(Options{MaxQPS: 1000, Jitter: 10 * time.Millisecond, Query: fc.query, Rand: func(time.Duration) time.Duration { return 0 }})
		var specs []Spec
		for _, res := range []string{"a", "b", "bad", "down"} {
			for _, n := range []string{"x.example.", "y.example."} {
				specs = append(specs, Spec{Key: Key{Name: n, Type: dns.TypeA, Resolver: res}, Policy: Policy{Mode: Expiry}})
			}
		}
		start := time.Now()
		r.Update(specs)
		r.SetHealthy(map[string]bool{"a": true, "b": true, "bad": true})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		time.Sleep(5 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		fc.mu.Lock()
		defer fc.mu.Unlock()
		for _, sp := range specs {
			k := sp.Key
			want := map[string]struct{ queries, fetches int }{"a": {3, 3}, "b": {3, 3}, "bad": {3, 0}, "down": {0, 0}}[k.Resolver]
			if q, f := fc.queries[k], fc.fetches[k]; q != want.queries || f != want.fetches {
				t.Errorf("%v: %d queries, %d fetches in 5s; want %d, %d", k, q, f, want.queries, want.fetches)
			}
		}
		for _, st := range r.Snapshot() {
			var want time.Duration
			switch st.Key.Resolver {
			case "a", "b":
				want = 6050 * time.Millisecond // the entry fetched at 4.05 expires at 6
			case "bad":
				want = 7 * time.Second // third failure at 3, then 4s of back-off
			default:
				continue
			}
			if got := st.NextRun.Sub(start); got != want {
				t.Errorf("%v: next run at +%v, want +%v", st.Key, got, want)
			}
		}
	})
}

// TestRunnerRespectsMaxQPS runs a runner with 200 due entries for 975ms
// of a fake clock at max_qps 20: the burst of 2 goes at once, then one
// query every 50ms (at 50, 100, ... 950ms).
func TestRunnerRespectsMaxQPS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var times []time.Duration
		start := time.Now()
		q := func(context.Context, Spec) Outcome {
			mu.Lock()
			times = append(times, time.Since(start))
			mu.Unlock()
			return Outcome{OK: true, TTL: time.Hour}
		}
		r := New(Options{MaxQPS: 20, Query: q})
		var specs []Spec
		for i := range 200 {
			specs = append(specs, Spec{Key: Key{Name: "n.example.", Type: uint16(i + 1), Resolver: "a"}})
		}
		r.Update(specs)
		r.SetHealthy(map[string]bool{"a": true})
		ctx, cancel := context.WithTimeout(context.Background(), 975*time.Millisecond)
		defer cancel()
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []time.Duration{0, 0}
		for ms := 50; ms < 975; ms += 50 {
			want = append(want, time.Duration(ms)*time.Millisecond)
		}
		if !slices.Equal(times, want) {
			t.Errorf("queries at %v, want at %v", times, want)
		}
		if c := r.Totals(); c.Queries != uint64(len(times)) {
			t.Errorf("Totals().Queries = %d, queries seen %d", c.Queries, len(times))
		}
	})
}

func TestQuery(t *testing.T) {
	srv := &dnstest.Server{TTL: 30, NegativeTTL: 7}
	var ecsMu sync.Mutex
	var gotECS []string
	dnstest.Run(t, srv)
	// A second server records the ECS option it receives and echoes it
	// with a scope: /24 for IPv4, /56 for IPv6.
	ecsSrv := &dns.Server{Net: "udp", Addr: "127.0.0.1:0", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if o := req.IsEdns0(); o != nil {
			for _, opt := range o.Option {
				if e, ok := opt.(*dns.EDNS0_SUBNET); ok {
					ecsMu.Lock()
					gotECS = append(gotECS, netip.PrefixFrom(netip.MustParseAddr(e.Address.String()), int(e.SourceNetmask)).String())
					ecsMu.Unlock()
					scope := uint8(24)
					if e.Family == 2 {
						scope = 56
					}
					m.SetEdns0(1232, false)
					m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: e.Family,
						SourceNetmask: e.SourceNetmask, SourceScope: scope, Address: e.Address})
				}
			}
		}
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(192, 0, 2, 9)})
		w.WriteMsg(m)
	})}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ecsSrv.PacketConn = pc
	started := make(chan struct{})
	ecsSrv.NotifyStartedFunc = func() { close(started) }
	go ecsSrv.ActivateAndServe()
	<-started
	defer ecsSrv.Shutdown()
	ecsAddr := netip.MustParseAddrPort(pc.LocalAddr().String())

	tests := []struct {
		name   string
		spec   Spec
		ok     bool
		ttl    time.Duration
		detail string
		scope  int
	}{
		{"answer TTL", Spec{Key: Key{Name: srv.Name("www"), Type: dns.TypeA}, Addr: srv.Addr()}, true, 30 * time.Second, "", 0},
		{"NODATA uses the SOA", Spec{Key: Key{Name: srv.Name("www"), Type: dns.TypeMX}, Addr: srv.Addr()}, true, 7 * time.Second, "", 0},
		{"NXDOMAIN uses the SOA", Spec{Key: Key{Name: srv.Name("nope"), Type: dns.TypeA}, Addr: srv.Addr()}, true, 7 * time.Second, "", 0},
		{"REFUSED fails", Spec{Key: Key{Name: "elsewhere.invalid.", Type: dns.TypeA}, Addr: srv.Addr()}, false, 0, "rcode REFUSED", 0},
		{"ECS v4 /32", Spec{Key: Key{Name: "e.example.", Type: dns.TypeA}, Addr: ecsAddr, ECS: netip.MustParseAddr("192.0.2.1")}, true, 5 * time.Second, "", 24},
		{"ECS v6 /128", Spec{Key: Key{Name: "e.example.", Type: dns.TypeA}, Addr: ecsAddr, ECS: netip.MustParseAddr("2001:db8::1")}, true, 5 * time.Second, "", 56},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			o := Query(ctx, tt.spec)
			if o.OK != tt.ok || o.TTL != tt.ttl || o.Detail != tt.detail || o.Scope != tt.scope {
				t.Errorf("Query = %+v, want ok=%v ttl=%v detail=%q scope=%d", o, tt.ok, tt.ttl, tt.detail, tt.scope)
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		srv.Freeze()
		defer srv.Thaw()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if o := Query(ctx, Spec{Key: Key{Name: srv.Name("www"), Type: dns.TypeA}, Addr: srv.Addr()}); o.OK || !strings.HasPrefix(o.Detail, "timeout after") {
			t.Errorf("Query to a frozen server = %+v, want a timeout", o)
		}
	})
	ecsMu.Lock()
	defer ecsMu.Unlock()
	if len(gotECS) != 2 || gotECS[0] != "192.0.2.1/32" || gotECS[1] != "2001:db8::1/128" {
		t.Errorf("ECS seen = %v, want [192.0.2.1/32 2001:db8::1/128]", gotECS)
	}
}
