package prefetch

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/internal/dnstest"

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

func TestRunnerKeepsWarmAndStops(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 5 s")
	}
	fc := newFakeCache(2)
	fc.fail["bad"] = true
	r := New(Options{MaxQPS: 1000, Jitter: 10 * time.Millisecond, Query: fc.query})
	var specs []Spec
	for _, res := range []string{"a", "b", "bad", "down"} {
		for _, n := range []string{"x.example.", "y.example."} {
			specs = append(specs, Spec{Key: Key{Name: n, Type: dns.TypeA, Resolver: res}, Policy: Policy{Mode: Expiry}})
		}
	}
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
		switch k.Resolver {
		case "a", "b":
			// 5 s at TTL 2: a fetch at start, then one per TTL: 3 or 4.
			if n := fc.fetches[k]; n < 3 || n > 4 {
				t.Errorf("%v: %d fetches in 5 s at TTL 2, want 3..4", k, n)
			}
			if q := fc.queries[k]; q > fc.fetches[k]+3 {
				t.Errorf("%v: %d queries for %d fetches", k, q, fc.fetches[k])
			}
		case "bad":
			// backoff 1, 2: queries at 0, 1, 3 (and maybe 7 is past the end)
			if q := fc.queries[k]; q < 2 || q > 4 {
				t.Errorf("%v: %d queries while failing, want 2..4 (backoff)", k, q)
			}
		case "down":
			if q := fc.queries[k]; q != 0 {
				t.Errorf("%v: %d queries to an unhealthy resolver", k, q)
			}
		}
	}
	for _, st := range r.Snapshot() {
		t.Logf("%v mode=%v healthy=%v ttl=%v next=%v fails=%d %+v", st.Key, st.Mode, st.Healthy, st.LastTTL, st.NextRun.Format("15:04:05.000"), st.ConsecutiveFailures, st.Counters)
	}
}

func TestRunnerRespectsMaxQPS(t *testing.T) {
	var mu sync.Mutex
	var times []time.Time
	q := func(context.Context, Spec) Outcome {
		mu.Lock()
		times = append(times, time.Now())
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// burst 2 plus 20/s for about one second.
	if n := len(times); n < 10 || n > 23 {
		t.Errorf("%d queries in %v at max_qps 20, want 10..23", n, time.Since(start))
	}
	if c := r.Totals(); c.Queries != uint64(len(times)) {
		t.Errorf("Totals().Queries = %d, queries seen %d", c.Queries, len(times))
	}
}

func TestQuery(t *testing.T) {
	srv := &dnstest.Server{TTL: 30, NegativeTTL: 7}
	var ecsMu sync.Mutex
	var gotECS []string
	dnstest.Run(t, srv)
	// A second server records the ECS option it receives.
	ecsSrv := &dns.Server{Net: "udp", Addr: "127.0.0.1:0", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if o := req.IsEdns0(); o != nil {
			for _, opt := range o.Option {
				if e, ok := opt.(*dns.EDNS0_SUBNET); ok {
					ecsMu.Lock()
					gotECS = append(gotECS, netip.PrefixFrom(netip.MustParseAddr(e.Address.String()), int(e.SourceNetmask)).String())
					ecsMu.Unlock()
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
	}{
		{"answer TTL", Spec{Key: Key{Name: srv.Name("www"), Type: dns.TypeA}, Addr: srv.Addr()}, true, 30 * time.Second, ""},
		{"NODATA uses the SOA", Spec{Key: Key{Name: srv.Name("www"), Type: dns.TypeMX}, Addr: srv.Addr()}, true, 7 * time.Second, ""},
		{"NXDOMAIN uses the SOA", Spec{Key: Key{Name: srv.Name("nope"), Type: dns.TypeA}, Addr: srv.Addr()}, true, 7 * time.Second, ""},
		{"REFUSED fails", Spec{Key: Key{Name: "elsewhere.invalid.", Type: dns.TypeA}, Addr: srv.Addr()}, false, 0, "rcode REFUSED"},
		{"ECS v4 /32", Spec{Key: Key{Name: "e.example.", Type: dns.TypeA}, Addr: ecsAddr, ECS: netip.MustParseAddr("192.0.2.1")}, true, 5 * time.Second, ""},
		{"ECS v6 /128", Spec{Key: Key{Name: "e.example.", Type: dns.TypeA}, Addr: ecsAddr, ECS: netip.MustParseAddr("2001:db8::1")}, true, 5 * time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			o := Query(ctx, tt.spec)
			if o.OK != tt.ok || o.TTL != tt.ttl || o.Detail != tt.detail {
				t.Errorf("Query = %+v, want ok=%v ttl=%v detail=%q", o, tt.ok, tt.ttl, tt.detail)
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
