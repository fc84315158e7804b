package responder

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/gslb"
)

// TestMetrics: queries by type and rcode, ECS queries, truncated replies,
// answers by policy and pool, last-resort answers, and the serial per
// zone.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	big := &fake{Big: 100}
	s := &Server{Metrics: m}
	s.Swap(answerFunc(func(q gslb.Query) gslb.Response {
		switch q.Name {
		case "www." + zone:
			return gslb.Response{Name: q.Name, Policy: "country=cn", Pool: "cn-pool", Answer: []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: []byte{192, 0, 2, 1}}}}
		case "down." + zone:
			return gslb.Response{Name: q.Name, LastResort: "servfail", Rcode: dns.RcodeServerFailure}
		}
		return big.Answer(q)
	}))
	src := netip.MustParseAddr("192.0.2.1")
	s.Respond(query("www."+zone, dns.TypeA, 0), src, false)
	s.Respond(withECS(query("www."+zone, dns.TypeA, 1232), []byte{0, 1, 24, 0, 192, 0, 2}), src, false)
	s.Respond(query("down."+zone, dns.TypeAAAA, 0), src, false)
	s.Respond(query("big."+zone, dns.TypeA, 0), src, false)
	s.Respond(query("big."+zone, dns.TypeA, 0), src, true)
	s.Respond(query("x."+zone, 65000, 0), src, false)
	m.setSerial([]string{zone}, 42)

	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"lbdns_gslb_answers_total", "cn-pool", 2},
		{"lbdns_gslb_last_resort_answers_total", "servfail", 1},
		{"lbdns_gslb_queries_total", "SERVFAIL", 1},
		{"lbdns_gslb_queries_total", "OTHER", 1},
		{"lbdns_gslb_ecs_queries_total", "", 1},
		{"lbdns_gslb_truncated_replies_total", "", 1},
		{"lbdns_gslb_soa_serial", zone, 42},
	} {
		if got := metricValueAny(t, reg, c.name, c.label); got != c.want {
			t.Errorf("%s{..%q..} = %v, want %v", c.name, c.label, got, c.want)
		}
	}
}

// metricValueAny is metricValue, also for series without labels (label
// "").
func metricValueAny(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	if label != "" {
		return metricValue(t, reg, name, label)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// BenchmarkRespond is the server's part of the answer path (header,
// EDNS, ECS, truncation) around a snapshot answering prebuilt records,
// without the socket and the packing.
func BenchmarkRespond(b *testing.B) {
	s := &Server{}
	// A snapshot's answer: records built once, shared by every query.
	ans := []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "www." + zone, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: []byte{192, 0, 2, 1}}}
	s.Swap(answerFunc(func(gslb.Query) gslb.Response {
		return gslb.Response{Answer: ans, Scope: 16, Pool: "p", Policy: "global"}
	}))
	src := netip.MustParseAddr("192.0.2.1")
	for _, c := range []struct {
		name string
		q    *dns.Msg
	}{
		{"A", query("www."+zone, dns.TypeA, 0)},
		{"A+EDNS+ECS", withECS(query("geo."+zone, dns.TypeA, 1232), []byte{0, 1, 24, 0, 192, 0, 2})},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Respond(c.q, src, false)
			}
		})
	}
}

// TestMetricsUDPReaders checks the UDP readers' counting: each counts
// locally, and every scrape sees every query answered before it (the
// counts folded on collection), through a reload's new label values, and
// after Shutdown.
func TestMetricsUDPReaders(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pool := "p1"
	s := &Server{Listen: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:0")}, Metrics: m}
	answer := func() {
		p := pool
		s.Swap(answerFunc(func(q gslb.Query) gslb.Response {
			return gslb.Response{Name: q.Name, Policy: "global", Pool: p, Scope: 24,
				Answer: []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: []byte{192, 0, 2, 1}}}}
		}))
	}
	answer()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = s.Shutdown(context.Background())
		}
	})
	addr := s.Addrs()[0].String()
	for i := range 20 {
		exchange(t, addr, "udp", query("www."+zone, dns.TypeA, 0))
		if got := metricValue(t, reg, "lbdns_gslb_queries_total", "NOERROR"); got != float64(i+1) {
			t.Fatalf("after %d queries: queries_total{NOERROR} = %v", i+1, got)
		}
	}
	for range 5 {
		exchange(t, addr, "udp", withECS(query("www."+zone, dns.TypeAAAA, 1232), []byte{0, 1, 24, 0, 192, 0, 2}))
	}
	pool = "p2"
	answer()
	for range 3 {
		exchange(t, addr, "udp", query("www."+zone, dns.TypeA, 0))
	}
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			name, label string
			want        float64
		}{
			{"lbdns_gslb_queries_total", "A", 23},
			{"lbdns_gslb_queries_total", "AAAA", 5},
			{"lbdns_gslb_answers_total", "p1", 25},
			{"lbdns_gslb_answers_total", "p2", 3},
			{"lbdns_gslb_ecs_queries_total", "", 5},
		} {
			if got := metricValueAny(t, reg, c.name, c.label); got != c.want {
				t.Errorf("%s: %s{..%q..} = %v, want %v", when, c.name, c.label, got, c.want)
			}
		}
	}
	check("serving")
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped = true
	check("after shutdown")
	if len(m.banks) != 0 {
		t.Errorf("%d banks of local counters left after shutdown", len(m.banks))
	}
}
