package report

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/control"
	"lbdns/health"
	"lbdns/hub"
	"lbdns/prefetch"
	"lbdns/probes"
	"lbdns/vip"
)

// gather registers Metrics over in on a new registry, lets events bump its
// counters, and returns every sample as "name{label=value,...}" (labels in
// name order) and the families' descriptions as "name type labels: help".
func gather(t *testing.T, in Input, events func(*Metrics)) (map[string]float64, []string) {
	t.Helper()
	return gatherWith(t, in, Status, events)
}

// gatherWith is gather with status building the snapshot from in.
func gatherWith(t *testing.T, in Input, status func(Input) *control.Status, events func(*Metrics)) (map[string]float64, []string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, func(context.Context) Input { return in }, status)
	if err != nil {
		t.Fatal(err)
	}
	if events != nil {
		events(m)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	samples := map[string]float64{}
	var families []string
	for _, mf := range mfs {
		var labels []string
		for i, mm := range mf.GetMetric() {
			var l []string
			for _, lp := range mm.GetLabel() {
				l = append(l, lp.GetName()+"="+lp.GetValue())
				if i == 0 {
					labels = append(labels, lp.GetName())
				}
			}
			key := mf.GetName() + "{" + strings.Join(l, ",") + "}"
			switch {
			case mm.GetGauge() != nil:
				samples[key] = mm.GetGauge().GetValue()
			case mm.GetCounter() != nil:
				samples[key] = mm.GetCounter().GetValue()
			case mm.GetHistogram() != nil:
				samples[key+"_count"] = float64(mm.GetHistogram().GetSampleCount())
			}
		}
		families = append(families, mf.GetName()+" "+mf.GetType().String()+" ["+strings.Join(labels, " ")+"]: "+mf.GetHelp())
	}
	return samples, families
}

func TestMetrics(t *testing.T) {
	in := testInput(t)
	in.Prefetch = []prefetch.Status{
		{Key: prefetch.Key{Name: "a.", Type: 1, Resolver: "a"}, Healthy: true, LastRefresh: t0},
		{Key: prefetch.Key{Name: "a.", Type: 1, Resolver: "d"}},
		{Key: prefetch.Key{Name: "a.", Type: 28, Resolver: "d"}},
	}
	in.PrefetchTotals = &prefetch.Counters{Queries: 9, Failures: 2, Fetches: 3, FoundExpired: 1}
	in.Serving = map[string]hub.Verdict{"v1": {Name: "v1", Serving: true}, "v2": {Name: "v2"}}
	in.GSLBResponder = &control.GSLBResponder{On: true, Listeners: []control.GSLBListener{{Listen: "127.0.0.1:53", Serving: true}}}
	got, families := gatherWith(t, in, withGSLB, func(m *Metrics) {
		m.Transition("d", "rec", health.Down)
		m.Transition("d", "rec", health.Down)
		m.GSLBTransition("web", "web-1", "https", health.Up)
		m.ObserveProbe("rec", probes.Result{OK: true, RTT: time.Millisecond})
		m.ObserveProbe("rec", probes.Result{RTT: time.Second})
		m.IPVSOp(vip.Op{Kind: vip.CreateDest})
		m.Reloaded(true, t0)
		m.Reloaded(false, t0.Add(time.Minute))
	})
	want := map[string]float64{
		"lbdns_warm{}":                                                                1,
		"lbdns_vip_serving{vip=v1}":                                                   1,
		"lbdns_vip_serving{vip=v2}":                                                   0,
		"lbdns_gslb_listener_serving{listen=127.0.0.1:53}":                            1,
		"lbdns_dry_run{}":                                                             0,
		"lbdns_start_time_seconds{}":                                                  float64(t0.Add(-time.Hour).Unix()),
		"lbdns_pool_members{pool=p}":                                                  4,
		"lbdns_pool_enabled_members{pool=p}":                                          3,
		"lbdns_pool_healthy_members{pool=p}":                                          2,
		"lbdns_pool_diagnosis{diagnosis=degraded,pool=p}":                             1,
		"lbdns_pool_vendor_members{pool=p,vendor=bind}":                               2,
		"lbdns_backend_up{pool=p,resolver=a,vendor=bind}":                             1,
		"lbdns_backend_up{pool=p,resolver=d,vendor=unbound}":                          0,
		"lbdns_backend_in_traffic{pool=p,resolver=b}":                                 1,
		"lbdns_backend_weight{pool=p,resolver=b}":                                     1,
		"lbdns_backend_in_traffic{pool=p,resolver=c}":                                 0,
		"lbdns_backend_flaps_total{pool=p,resolver=a}":                                3,
		"lbdns_backend_override{action=disable,pool=p,resolver=c}":                    1,
		"lbdns_overrides{action=disable,orphaned=true}":                               1,
		"lbdns_overrides{action=disable,orphaned=false}":                              1,
		"lbdns_overrides{action=drain,orphaned=false}":                                2,
		"lbdns_overrides{action=drain,orphaned=true}":                                 0,
		"lbdns_override_set_timestamp_seconds{action=drain,pool=,resolver=b,vip=v2}":  float64(t0.Unix()),
		"lbdns_override_set_timestamp_seconds{action=disable,pool=p,resolver=c,vip=}": float64(t0.Unix()),
		"lbdns_ipvs_errors_total{}":                                                   2,
		"lbdns_ipvs_failed_operations_total{}":                                        1,
		"lbdns_ipvs_dumps_total{}":                                                    4,
		"lbdns_ipvs_destination_connections_total{destination=198.51.100.2:53,resolver=b,service=udp/192.0.2.1:53,vip=v1}":          10,
		"lbdns_ipvs_destination_packets_total{destination=198.51.100.2:53,direction=in,resolver=b,service=tcp/192.0.2.1:53,vip=v1}": 50,
		"lbdns_ipvs_destination_inactive_connections{destination=198.51.100.2:53,resolver=b,service=udp/192.0.2.2:5353,vip=v2}":     7,
		"lbdns_prefetch_entries{state=ok}":                                    1,
		"lbdns_prefetch_entries{state=parked}":                                2,
		"lbdns_prefetch_entries{state=failing}":                               0,
		"lbdns_prefetch_entries{state=pending}":                               0,
		"lbdns_prefetch_queries_total{}":                                      9,
		"lbdns_prefetch_failures_total{}":                                     2,
		"lbdns_prefetch_fetches_total{}":                                      3,
		"lbdns_prefetch_expired_total{}":                                      1,
		"lbdns_backend_transitions_total{check=rec,resolver=d,to=down}":       2,
		"lbdns_probe_duration_seconds{check=rec,result=ok}_count":             1,
		"lbdns_probe_duration_seconds{check=rec,result=fail}_count":           1,
		"lbdns_ipvs_operations_total{op=create-dest}":                         1,
		"lbdns_config_reloads_total{result=applied}":                          1,
		"lbdns_config_reloads_total{result=rejected}":                         1,
		"lbdns_config_last_reload_successful{}":                               0,
		"lbdns_config_last_reload_success_timestamp_seconds{}":                float64(t0.Unix()),
		"lbdns_gslb_pool_members{pool=web}":                                   3,
		"lbdns_gslb_pool_up_members{pool=web}":                                1,
		"lbdns_gslb_member_up{member=web-1,pool=web}":                         1,
		"lbdns_gslb_member_up{member=web-2,pool=web}":                         0,
		"lbdns_gslb_member_up{member=web-3,pool=web}":                         0,
		"lbdns_gslb_member_state{member=web-1,pool=web,state=up}":             1,
		"lbdns_gslb_member_state{member=web-2,pool=web,state=down}":           1,
		"lbdns_gslb_member_state{member=web-3,pool=web,state=unknown}":        1,
		"lbdns_gslb_monitor_up{check=https,member=web-1,pool=web}":            1,
		"lbdns_gslb_monitor_up{check=ping,member=web-1,pool=web}":             1,
		"lbdns_gslb_monitor_up{check=https,member=web-2,pool=web}":            0,
		"lbdns_gslb_monitor_rtt_seconds{check=https,member=web-1,pool=web}":   0.0125,
		"lbdns_gslb_certificate_days_left{check=https,member=web-1,pool=web}": 41,
		"lbdns_gslb_certificate_days_left{check=https,member=web-2,pool=web}": -2,
		"lbdns_gslb_icmp_loss_ratio{check=ping,member=web-1,pool=web}":        0.2,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if g := got["lbdns_gslb_transitions_total{check=https,member=web-1,pool=web,to=up}"]; g != 1 {
		t.Errorf("lbdns_gslb_transitions_total{check=https,member=web-1,pool=web,to=up} = %v, want 1", g)
	}
	for _, absent := range []string{
		"lbdns_gslb_monitor_rtt_seconds{check=https,member=web-3,pool=web}",        // never probed
		"lbdns_gslb_certificate_days_left{check=ping,member=web-1,pool=web}",       // not https
		"lbdns_gslb_icmp_loss_ratio{check=https,member=web-1,pool=web}",            // not icmp
		"lbdns_gslb_member_state{member=web-1,pool=web,state=down}",                // not its state
		"lbdns_override_set_timestamp_seconds{action=drain,pool=,resolver=c,vip=}", // no set time
		"lbdns_override_set_timestamp_seconds{action=disable,pool=,resolver=gone,vip=}",
	} {
		if _, ok := got[absent]; ok {
			t.Errorf("%s present", absent)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "lbdns_gslb_") && strings.Contains(k, "192.0.2.") {
			t.Errorf("GSLB series with an address label: %s", k)
		}
	}
	if _, ok := got["lbdns_backend_override{action=none,pool=p,resolver=a}"]; ok {
		t.Error("backend_override for a member without an override")
	}
	for k := range got {
		if strings.HasPrefix(k, "lbdns_ipvs_destination_connections_total") && strings.Contains(k, "resolver=a") {
			t.Errorf("destination series without statistics: %s", k)
		}
	}

	t.Run("families unchanged", func(t *testing.T) {
		golden := filepath.Join("testdata", "metrics.txt")
		text := strings.Join(families, "\n") + "\n"
		if os.Getenv("LBDNS_UPDATE_GOLDEN") != "" {
			if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != text {
			t.Errorf("metric families (name, type, labels, help) changed; dashboards and README depend on them:\ngot:\n%s\nwant:\n%s", text, b)
		}
	})

	t.Run("no gslb series without GSLB pools", func(t *testing.T) {
		got, _ := gather(t, testInput(t), nil)
		for k := range got {
			if strings.HasPrefix(k, "lbdns_gslb_") {
				t.Errorf("%s without GSLB pools", k)
			}
		}
	})

	t.Run("no prefetch series without a prefetcher", func(t *testing.T) {
		in := testInput(t)
		got, _ := gather(t, in, nil)
		for k := range got {
			if strings.HasPrefix(k, "lbdns_prefetch_") {
				t.Errorf("%s without a prefetcher", k)
			}
		}
	})
}

// withGSLB is Status with two GSLB members of pool "web" added: web-1 up
// under an https and an icmp monitor, web-2 down behind a probe address
// with an expired certificate, web-3 not probed yet.
func withGSLB(in Input) *control.Status {
	st := Status(in)
	st.GSLB = []control.GSLBPool{{Name: "web", Combine: "all", Up: 1, Total: 3, Members: []control.GSLBMember{
		{Name: "web-1", Address: "192.0.2.10", Weight: 100, State: "up", Since: t0.Add(-time.Hour), Monitors: []control.GSLBMonitor{
			{Check: "https", Kind: "https", State: "up", LastProbe: t0, LastResult: "ok", RTTMillis: 12.5, Facts: []control.Fact{{Name: "cert_days_left", Value: 41}}},
			{Check: "ping", Kind: "icmp", State: "up", LastProbe: t0, LastResult: "ok", RTTMillis: 0.5, Facts: []control.Fact{{Name: "loss_percent", Value: 20}, {Name: "socket", Text: "raw"}}},
		}},
		{Name: "web-2", Address: "192.0.2.11", ProbeAddress: "192.0.2.111", Weight: 100, State: "down", Since: t0.Add(-time.Minute),
			Reason: "https down: certificate expired", Monitors: []control.GSLBMonitor{
				{Check: "https", Kind: "https", State: "down", LastProbe: t0, LastResult: "x509: certificate has expired", RTTMillis: 3, Facts: []control.Fact{{Name: "cert_days_left", Value: -2}}},
			}},
		{Name: "web-3", Address: "192.0.2.12", Weight: 100, State: "unknown", Monitors: []control.GSLBMonitor{
			{Check: "https", Kind: "https", State: "unknown"},
		}},
	}}}
	return st
}
