package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"lbdns/control"
)

// TestMetrics scrapes /metrics of a running daemon, parses it as the
// Prometheus text format, and checks the series an operator alerts on,
// before and after a drain and a back end going down.
func TestMetrics(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	w := newWorld(t, onePool(3))
	d := w.startReady()
	url := d.statusURL() + "/metrics"

	fams := scrape(t, url)
	for _, name := range []string{"r1", "r2", "r3"} {
		vendor := w.layout.resolver(name).vendor
		fams.want(t, "lbdns_backend_up", "GAUGE", map[string]string{"pool": "main", "resolver": name, "vendor": vendor}, eq(1))
		fams.want(t, "lbdns_backend_transitions_total", "COUNTER", map[string]string{"resolver": name, "check": "rec", "to": "up"}, atLeast(1))
	}
	fams.want(t, "lbdns_probe_duration_seconds", "HISTOGRAM", map[string]string{"check": "rec", "result": "ok"}, atLeast(3))
	fams.want(t, "lbdns_pool_healthy_members", "GAUGE", map[string]string{"pool": "main"}, eq(3))
	fams.want(t, "lbdns_pool_fail_open", "GAUGE", map[string]string{"pool": "main"}, eq(0))
	fams.want(t, "lbdns_ipvs_operations_total", "COUNTER", map[string]string{"op": "create-service"}, eq(2))
	fams.want(t, "lbdns_ipvs_operations_total", "COUNTER", map[string]string{"op": "create-dest"}, atLeast(6))
	fams.want(t, "lbdns_ipvs_errors_total", "COUNTER", nil, eq(0))
	fams.want(t, "lbdns_config_last_reload_successful", "GAUGE", nil, eq(1))
	fams.want(t, "lbdns_config_last_reload_success_timestamp_seconds", "GAUGE", nil,
		between(float64(begin.Unix()), float64(time.Now().Unix()+1)))
	if f, ok := fams["lbdns_backend_override"]; ok && len(f.samples) > 0 {
		t.Errorf("lbdns_backend_override before any override: %v", f.samples)
	}

	w.mustLbctl("drain", "r1", "--reason", "metrics")
	if err := w.backend("r2").Stop(); err != nil {
		t.Fatal(err)
	}
	// The table file is written after the operations are counted.
	w.waitTable("r1 drained, r2 out", w.wantTable([]string{"r1"}, []string{"r2"}))
	fams = scrape(t, url)
	fams.want(t, "lbdns_backend_up", "GAUGE", map[string]string{"resolver": "r2"}, eq(0))
	fams.want(t, "lbdns_backend_up", "GAUGE", map[string]string{"resolver": "r1"}, eq(1))
	fams.want(t, "lbdns_backend_up", "GAUGE", map[string]string{"resolver": "r3"}, eq(1))
	fams.want(t, "lbdns_backend_override", "GAUGE", map[string]string{"pool": "main", "resolver": "r1", "action": "drain"}, eq(1))
	fams.want(t, "lbdns_backend_transitions_total", "COUNTER", map[string]string{"resolver": "r2", "to": "down"}, atLeast(1))
	fams.want(t, "lbdns_probe_duration_seconds", "HISTOGRAM", map[string]string{"check": "rec", "result": "fail"}, atLeast(2))
	// r1 is drained and r2 down: r3 alone is healthy, which is enough.
	fams.want(t, "lbdns_pool_healthy_members", "GAUGE", map[string]string{"pool": "main"}, eq(1))
	fams.want(t, "lbdns_pool_fail_open", "GAUGE", map[string]string{"pool": "main"}, eq(0))
	fams.want(t, "lbdns_ipvs_operations_total", "COUNTER", map[string]string{"op": "update-dest"}, atLeast(2))
	fams.want(t, "lbdns_ipvs_operations_total", "COUNTER", map[string]string{"op": "delete-dest"}, atLeast(2))
	// Every family exported is in the metrics guide.
	if u := undocumented(t, slices.Collect(maps.Keys(fams))); len(u) > 0 {
		t.Errorf("metrics exported but not in docs/status-and-metrics.md: %q", u)
	}
}

// TestStatusEndpointReadOnly: the status endpoint refuses every method
// but GET and HEAD, and its GET /status is lbctl status -o json's
// document.
func TestStatusEndpointReadOnly(t *testing.T) {
	t.Parallel()
	w := newWorld(t, onePool(2))
	d := w.startReady()
	w.mustLbctl("drain", "r2", "--reason", "read-only test")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	for _, path := range []string{"/", "/status", "/metrics"} {
		for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
			req, err := http.NewRequest(method, d.statusURL()+path, strings.NewReader(`{"action": "enable", "resolver": "r2"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" || !strings.Contains(string(body), "read-only") {
				t.Errorf("%s %s: status %d, Allow %q, body %s; want 405 read-only, Allow GET, HEAD", method, path, resp.StatusCode, resp.Header.Get("Allow"), body)
			}
		}
	}
	checkOverrides(t, w.statusJSON().Overrides, "r2 drain read-only test")

	resp, err := hc.Get(d.statusURL() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /status: %d %q (err %v)\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), err, body)
	}
	var viaHTTP control.Status
	decodeStrict(t, string(body), &viaHTTP)
	lbctlOut := w.mustLbctl("-o", "json", "status").stdout
	var viaLbctl control.Status
	decodeStrict(t, lbctlOut, &viaLbctl)
	if viaHTTP.Version != 1 || viaLbctl.Version != 1 {
		t.Errorf("versions %d (GET /status) and %d (lbctl), want 1", viaHTTP.Version, viaLbctl.Version)
	}
	httpKeys, lbctlKeys := jsonKeys(t, string(body)), jsonKeys(t, lbctlOut)
	if !slices.Equal(httpKeys, lbctlKeys) {
		t.Errorf("GET /status has the keys\n%s\nlbctl status -o json has\n%s", strings.Join(httpKeys, "\n"), strings.Join(lbctlKeys, "\n"))
	}
	if summary(&viaHTTP) != summary(&viaLbctl) {
		t.Errorf("GET /status says\n%s\nlbctl status -o json says\n%s", summary(&viaHTTP), summary(&viaLbctl))
	}

	resp, err = hc.Get(d.statusURL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page), w.addr("r1")) || !strings.Contains(string(page), "read-only test") {
		t.Errorf("GET /: %d %q, want the status page with r1's address and r2's override reason", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// summary is the part of a status that does not change from one snapshot
// to the next while nothing happens.
func summary(st *control.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "config %s dry-run %v warm %v last reload %s\n", st.Daemon.Config, st.Daemon.DryRun, st.Daemon.Warm, st.Daemon.LastReload)
	for _, v := range st.VIPs {
		fmt.Fprintf(&b, "vip %s %s %s\n", v.Name, v.Address, v.Pool)
		for _, s := range v.Services {
			for _, d := range s.Destinations {
				fmt.Fprintf(&b, "  %s %s -> %s %s w=%d\n", s.Proto, s.Address, d.Resolver, d.Address, d.Weight)
			}
		}
	}
	for _, p := range st.Pools {
		fmt.Fprintf(&b, "pool %s %d/%d/%d %s\n", p.Name, p.Healthy, p.Enabled, p.Total, p.Diagnosis)
		for _, m := range p.Members {
			fmt.Fprintf(&b, "  %s %s %s since %s %s %q w=%d\n", m.Resolver, m.Address, m.State, m.Since, m.Override, m.OverrideReason, m.Weight)
		}
	}
	for _, o := range st.Overrides {
		fmt.Fprintf(&b, "override %s %s %q %s %s\n", o.Resolver, o.Action, o.Reason, o.Set, o.By)
	}
	return b.String()
}

// jsonKeys lists the key paths of a JSON document ("pools[].members[].state"),
// sorted.
func jsonKeys(t *testing.T, doc string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, doc)
	}
	keys := map[string]bool{}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				keys[path+"."+k] = true
				walk(e, path+"."+k)
			}
		case []any:
			for _, e := range x {
				walk(e, path+"[]")
			}
		}
	}
	walk(v, "")
	return slices.Sorted(maps.Keys(keys))
}

// families are parsed metric families: name → family.
type families map[string]family

// family is one metric family: its type and its samples.
type family struct {
	typ     string
	samples []sample
}

// sample is one series: its labels and its value (for a histogram, its
// sample count).
type sample struct {
	labels map[string]string
	value  float64
}

// scrape GETs url and parses it with the Prometheus text parser.
func scrape(t *testing.T, url string) families {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %s, Content-Type %q", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not the Prometheus text format: %v", url, err)
	}
	out := families{}
	for name, mf := range mfs {
		f := family{typ: mf.GetType().String()}
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			switch f.typ {
			case "GAUGE":
				s.value = m.GetGauge().GetValue()
			case "COUNTER":
				s.value = m.GetCounter().GetValue()
			case "HISTOGRAM":
				s.value = float64(m.GetHistogram().GetSampleCount())
			case "UNTYPED":
				s.value = m.GetUntyped().GetValue()
			}
			f.samples = append(f.samples, s)
		}
		out[name] = f
	}
	return out
}

// match returns the samples of family name whose labels include labels.
func (fs families) match(name string, labels map[string]string) []sample {
	var out []sample
	for _, s := range fs[name].samples {
		ok := true
		for k, v := range labels {
			ok = ok && s.labels[k] == v
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// dump formats family name for a failure message.
func (fs families) dump(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s):\n", name, fs[name].typ)
	for _, s := range fs[name].samples {
		fmt.Fprintf(&b, "  %v %g\n", s.labels, s.value)
	}
	return b.String()
}

// want checks that family name has type typ and exactly one sample with
// labels, whose value passes check.
func (fs families) want(t *testing.T, name, typ string, labels map[string]string, check valueCheck) {
	t.Helper()
	f, ok := fs[name]
	if !ok {
		t.Errorf("no metric family %s", name)
		return
	}
	if f.typ != typ {
		t.Errorf("%s is a %s, want %s", name, f.typ, typ)
	}
	m := fs.match(name, labels)
	if len(m) != 1 {
		t.Errorf("%s%v: %d samples, want one\n%s", name, labels, len(m), fs.dump(name))
		return
	}
	if !check.ok(m[0].value) {
		t.Errorf("%s%v = %g, want %s", name, labels, m[0].value, check.text)
	}
}

// valueCheck is a condition on a sample's value.
type valueCheck struct {
	ok   func(float64) bool
	text string
}

func eq(v float64) valueCheck {
	return valueCheck{func(x float64) bool { return x == v }, fmt.Sprint(v)}
}

func atLeast(v float64) valueCheck {
	return valueCheck{func(x float64) bool { return x >= v }, fmt.Sprintf(">= %g", v)}
}

func between(lo, hi float64) valueCheck {
	return valueCheck{func(x float64) bool { return x >= lo && x <= hi }, fmt.Sprintf("in [%g, %g]", lo, hi)}
}
