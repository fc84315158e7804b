package prefetch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lbdns/internal/lab/dnstest"
	"lbdns/internal/lab/vendors"

	"github.com/miekg/dns"
)

// Figures of the real-vendor comparison.
const (
	vendorTTL     = 10                    // s: BIND prefetches only TTL >= 9 s
	upstreamDelay = 80 * time.Millisecond // added by the authoritative
	// missThreshold: a client answer slower than this is a miss. A real
	// miss waits for the upstream, so it takes at least upstreamDelay; a
	// threshold near it keeps a scheduling stall of a loaded machine (tens
	// of milliseconds under the race detector) from counting as a miss.
	missThreshold  = upstreamDelay * 7 / 8
	vendorNames    = 4                      // names per resolver
	clientInterval = 250 * time.Millisecond // mean gap between a client's queries
)

// setup is one resolver process in one configuration, with an
// authoritative of its own so that its upstream queries are counted apart.
type setup struct {
	vendor  vendors.Vendor
	config  string // "none", "native", "daemon"
	native  bool   // the product's own prefetch switched on
	daemon  bool   // kept warm by a Runner
	refresh string // policy of the daemon: "window" or "expiry"

	auth *dnstest.Server
	proc *vendors.Process

	mu             sync.Mutex
	queries, miss  int
	errors         int
	slowest        time.Duration
	upstreamByName map[string]int
}

func (s *setup) label() string {
	l := string(s.vendor) + " " + s.config
	if s.daemon {
		l += " (" + s.refresh + ")"
	}
	return l
}

// vendorSeconds is how long the client loop runs: 25 s in tests,
// LBDNS_PREFETCH_SECONDS (bench/prefetch/run.sh sets 60) when set.
func vendorSeconds() time.Duration {
	if v, err := strconv.Atoi(os.Getenv("LBDNS_PREFETCH_SECONDS")); err == nil && v > 0 && v <= 600 {
		return time.Duration(v) * time.Second
	}
	return 25 * time.Second
}

// TestVendors runs real resolver products side by side on loopback, each
// forwarding to a slow authoritative with short TTLs, in three
// configurations: no prefetcher and native prefetch off, native prefetch
// alone, and the daemon's prefetcher; a bounded client loop counts
// client-visible misses, and the authoritatives count upstream queries.
func TestVendors(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real resolvers for 25 s")
	}
	setups := []*setup{
		{vendor: vendors.Dnsmasq, config: "none"},
		{vendor: vendors.Dnsmasq, config: "daemon", daemon: true, refresh: "expiry"},
		{vendor: vendors.Unbound, config: "none"},
		{vendor: vendors.Unbound, config: "native", native: true},
		{vendor: vendors.Unbound, config: "daemon", daemon: true, refresh: "expiry"},
		{vendor: vendors.Unbound, config: "daemon+native", native: true, daemon: true, refresh: "window"},
		{vendor: vendors.BIND, config: "none"},
		{vendor: vendors.BIND, config: "native", native: true},
		{vendor: vendors.BIND, config: "daemon+native", native: true, daemon: true, refresh: "window"},
	}
	var specs []Spec
	for i, s := range setups {
		var rrs []dns.RR
		s.auth = &dnstest.Server{TTL: vendorTTL, Records: []dns.RR{}}
		for n := range vendorNames {
			rr, err := dns.NewRR(fmt.Sprintf("n%d.%s %d IN A 192.0.2.%d", n, dnstest.DefaultZone, vendorTTL, n+1))
			if err != nil {
				t.Fatal(err)
			}
			rrs = append(rrs, rr)
		}
		s.auth.Records = rrs
		dnstest.Run(t, s.auth)
		s.auth.SetDelay(upstreamDelay)
		s.proc = vendors.StartWith(t, s.vendor, s.auth.Addr(), vendors.Options{Prefetch: s.native})
		if !s.daemon {
			continue
		}
		res := "r" + strconv.Itoa(i)
		pol := PolicyFor(string(s.vendor), s.refresh, 0, 0)
		if s.refresh == "window" {
			switch s.vendor {
			case vendors.BIND:
				pol = PolicyFor("bind", "window", 2*time.Second, 0)
			default:
				pol = PolicyFor(string(s.vendor), "window", 0, 10)
			}
		}
		for n := range vendorNames {
			specs = append(specs, Spec{Key: Key{Name: s.auth.Name("n" + strconv.Itoa(n)), Type: dns.TypeA, Resolver: res}, Addr: s.proc.Addr, Policy: pol})
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Warm every cache once (also those without the daemon), so that all
	// configurations start from the same state.
	for _, s := range setups {
		for n := range vendorNames {
			qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
			if _, err := s.proc.Query(qctx, s.auth.Name("n"+strconv.Itoa(n)), dns.TypeA); err != nil {
				t.Logf("warm-up %s: %v", s.label(), err)
			}
			qcancel()
		}
	}
	r := New(Options{MaxQPS: 100, Jitter: 10 * time.Millisecond})
	r.Update(specs)
	healthy := map[string]bool{}
	for _, sp := range specs {
		healthy[sp.Key.Resolver] = true
	}
	r.SetHealthy(healthy)
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(ctx) }()
	defer func() { cancel(); <-runDone }()
	time.Sleep(500 * time.Millisecond)
	for _, s := range setups {
		s.auth.ResetCounts()
	}

	dur := vendorSeconds()
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range setups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.clientLoop(ctx, start.Add(dur))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, s := range setups {
		s.upstreamByName = s.auth.Counts()
	}
	tot := r.Totals()

	ttls := elapsed.Seconds() / vendorTTL
	t.Logf("%d names per resolver, TTL %ds, upstream delay %v, miss > %v, client query every %v on average per resolver, %v",
		vendorNames, vendorTTL, upstreamDelay, missThreshold, clientInterval, elapsed.Round(time.Second))
	t.Logf("%-30s %8s %7s %9s %8s %18s", "resolver / configuration", "queries", "misses", "miss %", "errors", "upstream/name/TTL")
	up := map[string]float64{}
	for _, s := range setups {
		n := 0
		for _, c := range s.upstreamByName {
			n += c
		}
		perNameTTL := float64(n) / vendorNames / ttls
		up[s.label()] = perNameTTL
		t.Logf("%-30s %8d %7d %8.2f%% %8d %18.2f", s.label(), s.queries, s.miss, 100*float64(s.miss)/float64(max(1, s.queries)), s.errors, perNameTTL)
	}
	t.Logf("prefetcher: %d queries, %d failures, %d upstream fetches caused or seen, %d found expired", tot.Queries, tot.Failures, tot.Fetches, tot.FoundExpired)
	var gapSum, gapMax time.Duration
	gapN := 0
	for _, st := range r.Snapshot() {
		if st.Gap > 0 {
			gapSum, gapMax, gapN = gapSum+st.Gap, max(gapMax, st.Gap), gapN+1
		}
	}
	if gapN > 0 {
		t.Logf("expiry gap (expiry to the daemon's re-fetch answered), last cycle of %d entries: mean %v, max %v",
			gapN, (gapSum / time.Duration(gapN)).Round(time.Millisecond), gapMax.Round(time.Millisecond))
	}
	for _, st := range r.Snapshot() {
		if testing.Verbose() {
			t.Logf("  %v mode=%v ttl=%v orig=%v gap=%v %+v", st.Key, st.Mode, st.LastTTL, st.OriginalTTL, st.Gap, st.Counters)
		}
	}

	// Assertions: robust on a loaded 2-core machine, not speed.
	byLabel := map[string]*setup{}
	for _, s := range setups {
		byLabel[string(s.vendor)+" "+s.config] = s
	}
	maxTTLs := dur.Seconds()/vendorTTL + 2
	for _, s := range setups {
		if !s.daemon {
			continue
		}
		t.Run(s.label(), func(t *testing.T) {
			if s.refresh == "window" {
				// Zero in principle; allow a few slow answers from a loaded machine.
				if limit := 2 + s.queries/100; s.miss > limit {
					t.Errorf("%d misses with the prefetcher on a window product, want at most %d", s.miss, limit)
				}
			} else {
				base := byLabel[string(s.vendor)+" none"]
				if base.miss >= 6 && s.miss*2 > base.miss {
					t.Errorf("%d misses with the prefetcher, %d without: want at least 50%% fewer", s.miss, base.miss)
				}
			}
			for name, c := range s.upstreamByName {
				if float64(c) > maxTTLs {
					t.Errorf("%s: %d upstream queries in %v at TTL %ds: more than one per TTL (+2)", name, c, elapsed.Round(time.Second), vendorTTL)
				}
			}
		})
	}
}

// clientLoop queries the setup's names at random times until end and
// counts answers slower than missThreshold.
func (s *setup) clientLoop(ctx context.Context, end time.Time) {
	c := &dns.Client{Net: "udp", Timeout: time.Second}
	for {
		gap := time.Duration(rand.Int64N(int64(2 * clientInterval)))
		if time.Now().Add(gap).After(end) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		q := new(dns.Msg)
		q.SetQuestion(s.auth.Name("n"+strconv.Itoa(rand.IntN(vendorNames))), dns.TypeA)
		q.RecursionDesired = true
		t0 := time.Now()
		resp, _, err := c.ExchangeContext(ctx, q, s.proc.Addr.String())
		rtt := time.Since(t0)
		s.mu.Lock()
		s.queries++
		if err != nil || resp.Rcode != dns.RcodeSuccess {
			s.errors++
		}
		if err != nil || rtt > missThreshold {
			s.miss++
		}
		s.slowest = max(s.slowest, rtt)
		s.mu.Unlock()
	}
}

// ecsAuthority is an authoritative on loopback that answers every A query
// with one record (TTL 30) and echoes the query's ECS option with scope,
// counting the queries it gets.
type ecsAuthority struct {
	addr    netip.AddrPort
	queries atomic.Int32
}

func startECSAuthority(t *testing.T, scope uint8) *ecsAuthority {
	t.Helper()
	a := &ecsAuthority{}
	srv := &dns.Server{Net: "udp", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		a.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(req)
		m.Authoritative = true
		if o := req.IsEdns0(); o != nil {
			m.SetEdns0(1232, false)
			for _, opt := range o.Option {
				if e, ok := opt.(*dns.EDNS0_SUBNET); ok {
					m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: e.Family,
						SourceNetmask: e.SourceNetmask, SourceScope: scope, Address: e.Address})
				}
			}
		}
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
			A: net.IPv4(192, 0, 2, 9)})
		w.WriteMsg(m)
	})}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.PacketConn = pc
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	a.addr = netip.MustParseAddrPort(pc.LocalAddr().String())
	return a
}

// TestUnboundSubnetFetches: Debian's unbound with its subnet cache, in
// front of an authoritative that answers ECS with a scope; two partitions
// of one name. With scope 0 the answer serves every subnet: the second
// partition's query is answered from the entry the first one's query just
// fetched (the authoritative saw one query), and the prefetcher counts one
// fetch, not two. With scope /24 the partitions are two cache entries,
// two upstream queries and two fetches. The scheduler runs on injected
// times; the queries are real.
func TestUnboundSubnetFetches(t *testing.T) {
	for _, tc := range []struct {
		scope    uint8
		upstream int32
		fetches  uint64
	}{{0, 1, 1}, {24, 2, 2}} {
		t.Run(fmt.Sprintf("scope %d", tc.scope), func(t *testing.T) {
			auth := startECSAuthority(t, tc.scope)
			proc := vendors.StartWith(t, vendors.Unbound, auth.addr, vendors.Options{SubnetCache: true})
			s := NewScheduler(0, nil)
			s.SetHealthy(map[string]bool{"u": true}, at(0))
			var specs []Spec
			for _, p := range []struct{ name, addr string }{{"eu", "192.0.2.1"}, {"us", "198.51.100.1"}} {
				specs = append(specs, Spec{Key: Key{Name: "www.example.test.", Type: dns.TypeA, Resolver: "u", Partition: p.name},
					Addr: proc.Addr, ECS: netip.MustParseAddr(p.addr), Policy: expiryPol})
			}
			s.Set(specs, at(0))
			for i := range specs {
				sp, ok := s.Pop(at(0.3))
				if !ok {
					t.Fatalf("entry %d not due", i)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				o := Query(ctx, sp)
				cancel()
				if !o.OK || o.Scope != int(tc.scope) {
					t.Fatalf("%v: %+v, want an answer with scope %d", sp.Key, o, tc.scope)
				}
				s.Done(sp.Key, o, at(0.3+0.01*float64(i)))
			}
			if n := auth.queries.Load(); n != tc.upstream {
				t.Fatalf("authoritative saw %d queries, want %d", n, tc.upstream)
			}
			if got := s.Totals().Fetches; got != tc.fetches {
				t.Errorf("prefetch fetches %d, want %d (upstream queries %d)", got, tc.fetches, tc.upstream)
			}
		})
	}
}
