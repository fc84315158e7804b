package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/monitor"
)

const gslbDoc = `
[check.web.dns]
qname = "www.example."

[check.alt.dns]
qname = "alt.example."

[[gslb.pool]]
name = "www"
monitors = ["web", "alt"]

[[gslb.pool.member]]
name = "w1"
address = "192.0.2.1"
probe_address = "198.51.100.1"
weight = 5
priority = 2

[[gslb.pool.member]]
name = "w2"
address = "2001:db8::2"
`

func TestGSLBPools(t *testing.T) {
	cfg, err := configs.Parse([]byte(gslbDoc), "g.toml")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	statuses := map[monitor.Key]monitor.TargetStatus{
		gslb.MonitorKey("www", "w1", "web"): {Health: health.Status{State: health.Up, Since: t0}, LastAt: t0,
			Last: check.Result{OK: true, Detail: "NOERROR", RTT: 1500 * time.Microsecond}},
		gslb.MonitorKey("www", "w1", "alt"): {Health: health.Status{State: health.Down, Since: t0.Add(time.Second), LastFailReason: "rcode SERVFAIL"},
			LastAt: t0.Add(time.Second), Last: check.Result{Detail: "rcode SERVFAIL", RTT: time.Second}},
	}
	st := Status(Input{Now: t0.Add(time.Minute), Config: cfg, Monitor: statuses})
	if len(st.GSLB) != 1 {
		t.Fatalf("GSLB = %+v", st.GSLB)
	}
	p := st.GSLB[0]
	if p.Name != "www" || p.Combine != "all" || p.AtLeast != 0 || p.Up != 0 || p.Total != 2 || len(p.Members) != 2 {
		t.Fatalf("pool = %+v", p)
	}
	w1, w2 := p.Members[0], p.Members[1]
	if w1.Name != "w1" || w1.Address != "192.0.2.1" || w1.ProbeAddress != "198.51.100.1" || w1.Weight != 5 || w1.Priority != 2 ||
		w1.State != "down" || !w1.Since.Equal(t0.Add(time.Second)) || w1.Since.Location() != time.UTC ||
		w1.Reason != "1 of 2 monitors up (all needed); down: alt (rcode SERVFAIL)" {
		t.Errorf("w1 = %+v", w1)
	}
	web, alt := w1.Monitors[0], w1.Monitors[1]
	if web.Check != "web" || web.Kind != "dns" || web.State != "up" || web.LastResult != "NOERROR" || !web.LastOK || web.RTTMillis != 1.5 || !web.LastProbe.Equal(t0) {
		t.Errorf("web = %+v", web)
	}
	if alt.State != "down" || alt.LastResult != "rcode SERVFAIL" || alt.LastOK || alt.RTTMillis != 1000 {
		t.Errorf("alt = %+v", alt)
	}
	if w2.State != "unknown" || w2.ProbeAddress != "2001:db8::2" || w2.Weight != 100 || !w2.Monitors[0].LastProbe.IsZero() {
		t.Errorf("w2 = %+v, want unknown with defaults while unprobed", w2)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"gslb":[{"name":"www","combine":"all","at_least":0,"up":0,"total":2,`, `"probe_address":"198.51.100.1"`,
		`"last_result":"rcode SERVFAIL"`, `"rtt_ms":1.5`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "cert_days_left") || strings.Contains(string(b), "loss_percent") || strings.Contains(string(b), `"socket"`) {
		t.Errorf("JSON has extras of other kinds: %s", b)
	}
}

func TestGSLBPoolsNone(t *testing.T) {
	cfg, err := configs.Load("../configs/minimal.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := GSLBPools(cfg, nil, nil, time.Now()); got != nil {
		t.Errorf("GSLBPools = %+v, want nil without [gslb]", got)
	}
	b, _ := json.Marshal(Status(Input{Config: cfg}))
	if strings.Contains(string(b), `"gslb"`) {
		t.Errorf("status JSON without [gslb] has a gslb key: %s", b)
	}
}

// TestMonitorViewFacts checks that the facts of a kind flow from the
// check's Result to the status JSON and the metrics by their names alone:
// an https monitor's certificate days left.
func TestMonitorViewFacts(t *testing.T) {
	mon := gslb.MonitorState{Check: "web", Kind: "https", State: health.Up, LastAt: time.Unix(1e9, 0),
		Last: check.Result{OK: true, Detail: "status 200", Facts: []check.Fact{{Name: "cert_days_left", Value: 41}}}}
	mo := monitorView(mon)
	b, err := json.Marshal(mo)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(b), `"rtt_ms":0,"cert_days_left":41}`) {
		t.Errorf("JSON %s, want cert_days_left 41 after rtt_ms", b)
	}
	c := newStatusCollector(nil, nil)
	got := map[string]float64{}
	pools := []control.GSLBPool{{Name: "p", Members: []control.GSLBMember{{Name: "m", Monitors: []control.GSLBMonitor{mo}}}}}
	collectGSLB(pools, c.facts, func(name string, v float64, labels ...string) { got[name] = v })
	if v, ok := got["gslb_certificate_days_left"]; !ok || v != 41 {
		t.Errorf("series %v, want gslb_certificate_days_left 41", got)
	}
	if _, ok := c.descs["gslb_certificate_days_left"]; !ok {
		t.Error("no description of gslb_certificate_days_left")
	}
}
