package flood

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lbdns/testkit/promgolden"
)

func TestMetrics(t *testing.T) {
	p := NewPipeline(Config{Alarms: AlarmConfig{Floor: 10, Rise: 4}, Top: 2}, t0)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMetrics(p))
	now := t0
	step := func(n int, client string) {
		for i := range n {
			c := netip.MustParseAddr(client)
			if i%2 == 0 && n < 100 {
				c = netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
			}
			p.Observe(Query{Client: c, Name: "www.example.com.", Type: 1, Source: SourceResponder})
		}
		now = now.Add(Epoch)
		p.Step(now, map[string]float64{"vip dns": 5})
	}
	for range 5 {
		step(20, "192.0.2.1")
	}
	step(1000, "192.0.2.99")
	want := `
# HELP lbdns_flood_alarm_active 1 while a flood alarm of the source is raised (rate alarms); share alarms under source "share".
# TYPE lbdns_flood_alarm_active gauge
lbdns_flood_alarm_active{reason="rise",source="responder"} 1
lbdns_flood_alarm_active{reason="rise",source="vip dns"} 0
lbdns_flood_alarm_active{reason="share",source="share"} 0
# HELP lbdns_flood_alarms_raised_total Flood alarms raised, by reason (rise: a rate over its baseline and the floor; share: one key's share of the short window).
# TYPE lbdns_flood_alarms_raised_total counter
lbdns_flood_alarms_raised_total{reason="rise"} 1
lbdns_flood_alarms_raised_total{reason="share"} 0
# HELP lbdns_flood_queries_total Queries counted by the flood alarms, by source (responder: the GSLB responder's own; dnstap: the resolvers').
# TYPE lbdns_flood_queries_total counter
lbdns_flood_queries_total{source="dnstap"} 0
lbdns_flood_queries_total{source="responder"} 1100
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lbdns_flood_alarm_active", "lbdns_flood_alarms_raised_total", "lbdns_flood_queries_total"); err != nil {
		t.Error(err)
	}
	// Two clients and two prefixes (top 2 of each), one name.
	if n := testutil.CollectAndCount(NewMetrics(p), "lbdns_flood_top_rate"); n != 5 {
		t.Errorf("%d top_rate series, want 5", n)
	}
	// The short window holds the 6 s the pipeline has run.
	want = `
# HELP lbdns_flood_top_share Share of the source's short window's queries of the heaviest keys, by source, kind and rank.
# TYPE lbdns_flood_top_share gauge
lbdns_flood_top_share{key="10.0.0.0/24",kind="prefixes",rank="2",source="responder"} 0.045454545454545456
lbdns_flood_top_share{key="192.0.2.0/24",kind="prefixes",rank="1",source="responder"} 0.9545454545454546
lbdns_flood_top_share{key="192.0.2.1",kind="clients",rank="2",source="responder"} 0.045454545454545456
lbdns_flood_top_share{key="192.0.2.99",kind="clients",rank="1",source="responder"} 0.9090909090909091
lbdns_flood_top_share{key="www.example.com.",kind="names",rank="1",source="responder"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lbdns_flood_top_share"); err != nil {
		t.Error(err)
	}
	if v := p.Top(SourceResponder, KindClient, 10*time.Second, 1); v.Seconds() != 6 || v.Entries[0].Rate != 1000.0/6 {
		t.Errorf("top client: %+v over %v s", v.Entries, v.Seconds())
	}
	promgolden.Check(t, "the flood alarms", promgolden.Lines(t, reg))
}
