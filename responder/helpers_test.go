package responder

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/gslb/topology"
	"lbdns/health"
	"lbdns/monitor"
	"lbdns/testkit/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m, "miekg/dns.(*Server)", "lbdns/responder.(*Server)", "lbdns/responder.(*Responder)")
}

// snapshotOf is the snapshot of cfg (over the topology of package
// gslb/topology) with every member up by check t but those of pools in
// down, and the members "POOL/MEMBER" in down.
func snapshotOf(t testing.TB, cfg *configs.Config, down ...string) *gslb.Snapshot {
	t.Helper()
	statuses := map[monitor.Key]monitor.TargetStatus{}
	for _, p := range cfg.GSLB.Pools {
		for _, m := range p.Members {
			st := health.Up
			for _, d := range down {
				if d == p.Name || d == p.Name+"/"+m.Name {
					st = health.Down
				}
			}
			k := gslb.MonitorKey(p.Name, m.Name, "t")
			statuses[k] = monitor.TargetStatus{Key: k, Health: health.Status{State: st}}
		}
	}
	loc, err := topology.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return gslb.NewSnapshot(cfg, gslb.Evaluate(cfg, statuses, time.Unix(1_800_000_000, 0)), loc, 1)
}

// zone is the fake snapshot's zone.
const zone = "example.test."

// fake is a stand-in snapshot: www answers A/AAAA without depending on
// the client (scope 0), geo answers with Scope (a location's scope, never
// the source prefix), big answers Big A records, the apex its SOA, other
// names in the zone NXDOMAIN with the SOA, names outside REFUSED. It
// remembers the last query.
type fake struct {
	// Scope is geo's ECS scope; Big is big's number of A records; Tag
	// is put in www's TXT answer to tell snapshots apart.
	Scope int
	Big   int
	Tag   string

	mu   sync.Mutex
	last gslb.Query
	n    int
}

func (f *fake) Answer(q gslb.Query) gslb.Response {
	f.mu.Lock()
	f.last, f.n = q, f.n+1
	scope := f.Scope
	f.mu.Unlock()
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 300},
		Ns: "ns1." + zone, Mbox: "hostmaster." + zone, Serial: 7, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 60}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: 30}
	}
	a := func(s string) dns.RR { return &dns.A{Hdr: hdr(dns.TypeA), A: net.ParseIP(s)} }
	switch {
	case !dns.IsSubDomain(zone, q.Name):
		return gslb.Response{Rcode: dns.RcodeRefused}
	case q.Name == zone && q.Type == dns.TypeSOA:
		return gslb.Response{Answer: []dns.RR{soa}}
	case q.Name == "www."+zone:
		switch q.Type {
		case dns.TypeA:
			return gslb.Response{Answer: []dns.RR{a("192.0.2.1")}}
		case dns.TypeAAAA:
			return gslb.Response{Answer: []dns.RR{&dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.ParseIP("2001:db8::1")}}}
		case dns.TypeTXT:
			return gslb.Response{Answer: []dns.RR{&dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: []string{f.Tag}}}}
		}
		return gslb.Response{Authority: []dns.RR{soa}}
	case q.Name == "geo."+zone && q.Type == dns.TypeA:
		return gslb.Response{Answer: []dns.RR{a("192.0.2.2")}, Scope: scope}
	case q.Name == "big."+zone && q.Type == dns.TypeA:
		var rrs []dns.RR
		for i := range f.Big {
			rrs = append(rrs, a("198.51.100."+strconv.Itoa(i+1)))
		}
		return gslb.Response{Answer: rrs, Extra: []dns.RR{a("192.0.2.99")}}
	}
	return gslb.Response{Rcode: dns.RcodeNameError, Authority: []dns.RR{soa}}
}

// lastQuery returns the last query answered.
func (f *fake) lastQuery() gslb.Query {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// start starts a Server on 127.0.0.1:0 answering from a, stopped when
// the test ends, and returns it with its address.
func start(t *testing.T, a gslb.Answerer) (*Server, string) {
	t.Helper()
	s := &Server{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}}
	s.Swap(a)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return s, s.Addrs()[0].String()
}

// exchange sends m to addr over network ("udp" or "tcp") and returns the
// reply.
func exchange(t *testing.T, addr, network string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("exchange %v over %s: %v", m.Question, network, err)
	}
	if r.Id != m.Id {
		t.Fatalf("reply id %d, want %d", r.Id, m.Id)
	}
	return r
}

// query is a query for name and type t, with EDNS (payload udp) unless
// udp is 0.
func query(name string, t uint16, udp uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, t)
	if udp > 0 {
		m.SetEdns0(udp, false)
	}
	return m
}

// withECS adds an ECS option of raw data (code 8, sent as miekg packs a
// local option: byte for byte) to m's OPT record.
func withECS(m *dns.Msg, data ...[]byte) *dns.Msg {
	opt := m.IsEdns0()
	if opt == nil {
		m.SetEdns0(1232, false)
		opt = m.IsEdns0()
	}
	for _, d := range data {
		opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: d})
	}
	return m
}

// ecsOf returns the ECS option of r, or nil.
func ecsOf(r *dns.Msg) *dns.EDNS0_SUBNET {
	opt := r.IsEdns0()
	if opt == nil {
		return nil
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_SUBNET); ok {
			return e
		}
	}
	return nil
}
