package report

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/health"
	"lbdns/prefetch"
	"lbdns/probes"
	"lbdns/vip"
)

// gather registers Metrics over in on a new registry, lets events bump its
// counters, and returns every sample as "name{label=value,...}" (labels in
// name order) and the families' descriptions as "name type labels: help".
func gather(t *testing.T, in Input, events func(*Metrics)) (map[string]float64, []string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, func(context.Context) Input { return in })
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
	got, families := gather(t, in, func(m *Metrics) {
		m.Transition("d", "rec", health.Down)
		m.Transition("d", "rec", health.Down)
		m.ObserveProbe("rec", probes.Result{OK: true, RTT: time.Millisecond})
		m.ObserveProbe("rec", probes.Result{RTT: time.Second})
		m.IPVSOp(vip.Op{Kind: vip.CreateDest})
		m.Reloaded(true, t0)
		m.Reloaded(false, t0.Add(time.Minute))
	})
	want := map[string]float64{
		"lbdns_warm{}":                                             1,
		"lbdns_dry_run{}":                                          0,
		"lbdns_start_time_seconds{}":                               float64(t0.Add(-time.Hour).Unix()),
		"lbdns_pool_members{pool=p}":                               4,
		"lbdns_pool_enabled_members{pool=p}":                       3,
		"lbdns_pool_healthy_members{pool=p}":                       2,
		"lbdns_pool_diagnosis{diagnosis=degraded,pool=p}":          1,
		"lbdns_pool_vendor_members{pool=p,vendor=bind}":            2,
		"lbdns_backend_up{pool=p,resolver=a,vendor=bind}":          1,
		"lbdns_backend_up{pool=p,resolver=d,vendor=unbound}":       0,
		"lbdns_backend_in_traffic{pool=p,resolver=b}":              1,
		"lbdns_backend_weight{pool=p,resolver=b}":                  1,
		"lbdns_backend_in_traffic{pool=p,resolver=c}":              0,
		"lbdns_backend_flaps_total{pool=p,resolver=a}":             3,
		"lbdns_backend_override{action=disable,pool=p,resolver=c}": 1,
		"lbdns_overrides{action=disable,orphaned=true}":            1,
		"lbdns_overrides{action=disable,orphaned=false}":           1,
		"lbdns_overrides{action=drain,orphaned=false}":             2,
		"lbdns_overrides{action=drain,orphaned=true}":              0,
		"lbdns_ipvs_errors_total{}":                                2,
		"lbdns_ipvs_failed_operations_total{}":                     1,
		"lbdns_ipvs_dumps_total{}":                                 4,
		"lbdns_ipvs_destination_connections_total{destination=198.51.100.2:53,resolver=b,service=udp/192.0.2.1:53,vip=v1}":          10,
		"lbdns_ipvs_destination_packets_total{destination=198.51.100.2:53,direction=in,resolver=b,service=tcp/192.0.2.1:53,vip=v1}": 50,
		"lbdns_ipvs_destination_inactive_connections{destination=198.51.100.2:53,resolver=b,service=udp/192.0.2.2:5353,vip=v2}":     7,
		"lbdns_prefetch_entries{state=ok}":                              1,
		"lbdns_prefetch_entries{state=parked}":                          2,
		"lbdns_prefetch_entries{state=failing}":                         0,
		"lbdns_prefetch_entries{state=pending}":                         0,
		"lbdns_prefetch_queries_total{}":                                9,
		"lbdns_prefetch_failures_total{}":                               2,
		"lbdns_prefetch_fetches_total{}":                                3,
		"lbdns_prefetch_expired_total{}":                                1,
		"lbdns_backend_transitions_total{check=rec,resolver=d,to=down}": 2,
		"lbdns_probe_duration_seconds{check=rec,result=ok}_count":       1,
		"lbdns_probe_duration_seconds{check=rec,result=fail}_count":     1,
		"lbdns_ipvs_operations_total{op=create-dest}":                   1,
		"lbdns_config_reloads_total{result=applied}":                    1,
		"lbdns_config_reloads_total{result=rejected}":                   1,
		"lbdns_config_last_reload_successful{}":                         0,
		"lbdns_config_last_reload_success_timestamp_seconds{}":          float64(t0.Unix()),
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
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
