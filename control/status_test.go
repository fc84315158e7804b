package control

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sampleStatus is a daemon with two pools, overrides and prefetch
// entries, at now.
func sampleStatus(now time.Time) *Status {
	stats := &DestStats{ActiveConns: 12, InactiveConns: 340, Conns: 123456, CPS: 42, PPSIn: 1500, PPSOut: 1480, BPSIn: 2_400_000, BPSOut: 9_100_000}
	return &Status{
		Version:   StatusVersion,
		Generated: now,
		Daemon: Daemon{
			Config: "/etc/lbdns/lbdns.toml", Started: now.Add(-26 * time.Hour), Warm: true,
			LastReload: now.Add(-3*time.Minute - 12*time.Second), IPVSOps: 17,
		},
		VIPs: []VIP{{Name: "dns-v4", Address: "192.0.2.53", Pool: "main", Services: []Service{
			{Proto: "udp", Address: "192.0.2.53:53", Scheduler: "wrr", Destinations: []Destination{{Resolver: "bind-1", Address: "10.0.0.1:53"}, {Resolver: "unbound-1", Address: "10.0.0.2:53"}}},
			{Proto: "tcp", Address: "192.0.2.53:53", Scheduler: "wrr", Destinations: []Destination{{Resolver: "bind-1", Address: "10.0.0.1:53"}}},
		}}},
		Pools: []Pool{{
			Name: "main", Check: "recursive", VIPs: []string{"dns-v4"}, MinHealthy: 2,
			Total: 3, Enabled: 3, Healthy: 1, Diagnosis: "degraded", Detail: "1 of 3 down",
			Vendors: []VendorCount{{Vendor: "bind", Total: 2, Healthy: 1}, {Vendor: "unbound", Total: 1, Healthy: 0}},
			Members: []Member{
				{Resolver: "bind-1", Address: "10.0.0.1:53", Vendor: "bind", Identity: "9.18.28-1~deb12u2-Debian", IdentifiedVendor: "bind",
					State: "up", Since: now.Add(-3*time.Minute - 12*time.Second), Fresh: true, LastProbe: now.Add(-time.Second), LastResult: "ok",
					RTTMillis: 1.25, Flaps: 2, Override: "none", InTraffic: true, Weight: 100, Why: WhyHealthy, WhyText: "healthy", Stats: stats},
				{Resolver: "bind-2", Address: "10.0.0.3:53", Vendor: "bind", Identity: "PowerDNS Recursor 5.0.2", IdentifiedVendor: "powerdns",
					State: "down", Since: now.Add(-time.Hour), Fresh: true, LastProbe: now.Add(-time.Second), LastResult: "timeout after 1s",
					Flaps: 7, Override: "drain", OverrideReason: "<script>alert(1)</script>", InTraffic: true, Weight: 0,
					Why: WhyDown, WhyText: "drained by an operator and down: timeout after 1s <id mismatch>"},
				{Resolver: "unbound-1", Address: "10.0.0.2:53", Vendor: "unbound", State: "unknown", Fresh: false, Override: "disable", OverrideReason: "disk swap",
					Why: WhyDisabled, WhyText: "disabled by an operator"},
			},
		}},
		Overrides: []Override{
			{Resolver: "bind-2", Pool: "main", Action: "drain", Reason: "<script>alert(1)</script>", Set: now.Add(-10 * time.Minute), By: "uid 0"},
			{Resolver: "gone-1", Action: "disable", Reason: "retired", Set: now.Add(-48 * time.Hour), By: "uid 1000", Orphaned: true},
		},
		Prefetch: []PrefetchEntry{{Name: "www.example.com.", Type: "A", Resolver: "bind-1", Mode: "window", LastRefresh: now.Add(-20 * time.Second),
			TTLSeconds: 300, RemainingSeconds: 280, NextRun: now.Add(4 * time.Minute), State: "ok"}},
	}
}

func TestStatusServerIsReadOnly(t *testing.T) {
	fb := &fakeBackend{status: sampleStatus(time.Now())}
	reg := prometheus.NewRegistry()
	h := NewStatusServer(StatusOptions{Backend: fb, Gatherer: reg}).Handler()
	for _, path := range []string{"/", "/status", "/metrics", "/v1/overrides", "/v1/reload"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(`{"action":"drain","resolver":"bind-1"}`)))
			switch path {
			case "/v1/overrides", "/v1/reload":
				if rec.Code != http.StatusNotFound {
					t.Errorf("%s %s = %d; want 404 (the status server has no control API)", method, path, rec.Code)
				}
			default:
				if rec.Code != http.StatusMethodNotAllowed {
					t.Errorf("%s %s = %d; want 405", method, path, rec.Code)
				}
				if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
					t.Errorf("%s %s: Allow = %q; want \"GET, HEAD\"", method, path, got)
				}
				if !strings.Contains(rec.Body.String(), "read-only") {
					t.Errorf("%s %s: body does not say read-only: %s", method, path, rec.Body)
				}
			}
		}
	}
	if o, r := fb.mutations(); o != 0 || r != 0 || fb.statusCalls != 0 {
		t.Errorf("backend called: %d overrides, %d reloads, %d status", o, r, fb.statusCalls)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nope", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nope = %d; want 404", rec.Code)
	}
}

func TestStatusServerStatus(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	fb := &fakeBackend{status: sampleStatus(now)}
	h := NewStatusServer(StatusOptions{Backend: fb}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /status = %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var st Status
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Version != 1 || len(st.Pools) != 1 || st.Pools[0].Members[1].OverrideReason != "<script>alert(1)</script>" {
		t.Errorf("decoded %+v", st)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/status", nil))
	if rec.Code != 200 {
		t.Errorf("HEAD /status = %d", rec.Code)
	}

	fb.statusErr = Errorf(Unavailable, "starting up")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "starting up") {
		t.Errorf("GET /status with a failing backend = %d %s", rec.Code, rec.Body)
	}
}

func TestStatusServerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "lbdns_test_ops_total", Help: "Test ops."})
	reg.MustRegister(c)
	c.Add(3)
	h := NewStatusServer(StatusOptions{Backend: &fakeBackend{}, Gatherer: reg}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	f := fams["lbdns_test_ops_total"]
	if f == nil || len(f.Metric) != 1 || f.Metric[0].GetCounter().GetValue() != 3 {
		t.Errorf("lbdns_test_ops_total = %v; want a counter at 3", f)
	}

	h = NewStatusServer(StatusOptions{Backend: &fakeBackend{}}).Handler()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /metrics without a Gatherer = %d; want 404", rec.Code)
	}
}

func TestStatusServerServe(t *testing.T) {
	fb := &fakeBackend{status: sampleStatus(time.Now())}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewStatusServer(StatusOptions{Backend: fb}).Serve(ctx, ln) }()
	c := &http.Client{Timeout: 10 * time.Second}
	r := do(t, c, http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
	if r.code != 200 || !strings.Contains(r.body, `data-resolver="bind-1"`) {
		t.Errorf("GET / over TCP = %d", r.code)
	}
	r = do(t, c, http.MethodPost, "http://"+ln.Addr().String()+"/status", []byte("{}"))
	if r.code != http.StatusMethodNotAllowed {
		t.Errorf("POST /status over TCP = %d", r.code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v; want nil after a stop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not stop")
	}
	c.CloseIdleConnections()
}
