package control

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lbdns/testkit/browser"
)

// longestStatus is a Status with the longest texts a real daemon writes:
// an upstream-failure diagnosis failing open with its last good set named,
// every vendor, long identities and last results, orphaned overrides with
// long reasons, GSLB pools with long reasons and every monitor column.
func longestStatus(now time.Time) *Status {
	st := sampleStatus(now)
	vendors := []string{"bind", "dnsmasq", "knot", "other", "powerdns", "unbound"}
	identities := map[string]string{
		"bind":     "9.18.28-1~deb12u2-Debian",
		"dnsmasq":  "dnsmasq-2.90",
		"knot":     "Knot Resolver 5.6.0",
		"other":    "Technitium DNS Server 13.0.2 (a build with a long version string)",
		"powerdns": "PowerDNS Recursor 5.0.2",
		"unbound":  "unbound 1.17.1",
	}
	p := Pool{Name: "datacenter-east-recursive", Check: "recursive-random-label", VIPs: []string{"dns-v4-east", "dns-v6-east", "dns-v4-east-internal"},
		MinHealthy: 4, Total: 12, Enabled: 11, Healthy: 0, FailOpen: true, Diagnosis: "upstream-failure"}
	var names []string
	for i := range 12 {
		v := vendors[i%len(vendors)]
		name := fmt.Sprintf("%s-resolver-%02d.east.example.net", v, i+1)
		names = append(names, name)
		m := Member{Resolver: name, Address: fmt.Sprintf("[2001:db8:100:200::%x]:5353", 0x1000+i), Vendor: v,
			Identity: identities[v], IdentifiedVendor: v, State: "down", Since: now.Add(-95 * time.Second), Fresh: true,
			LastProbe: now.Add(-time.Second), LastResult: "SERVFAIL for r8f3a2c19d0e4b7a6.check.lbdns.example.net. A (want NXDOMAIN) after 1.000s",
			RTTMillis: 999.9, Flaps: 123, Override: "none", InTraffic: true, Weight: 65535, Why: WhyHeldFailOpen,
			WhyText: "failing its check (down: SERVFAIL for r8f3a2c19d0e4b7a6.check.lbdns.example.net. A (want NXDOMAIN)), held by fail-open: in traffic before the pool collapsed",
			Stats:   &DestStats{ActiveConns: 123456, InactiveConns: 9876543, Conns: 1 << 40, CPS: 123456, PPSIn: 98765432, PPSOut: 98765432, BPSIn: 1 << 40, BPSOut: 1 << 40}}
		if i == 11 {
			m.Override, m.OverrideReason, m.InTraffic, m.Why = "disable", "RMA ticket INC-2025-0042: replace the failed disk in slot 3 and re-image the host", false, WhyDisabled
			m.WhyText = "disabled by an operator"
		}
		p.Members = append(p.Members, m)
	}
	for _, v := range vendors {
		p.Vendors = append(p.Vendors, VendorCount{Vendor: v, Total: 2, Healthy: 0})
	}
	p.Detail = fmt.Sprintf("every enabled member (11, vendors %s) fails the check at once (11 down, 0 failing): the upstream or the check is the likely cause, not the resolvers; last reason: SERVFAIL for r8f3a2c19d0e4b7a6.check.lbdns.example.net. A (want NXDOMAIN)"+
		"; fail-open: holding the members in traffic before the collapse (%s)", strings.Join(vendors, ", "), strings.Join(names[:11], ", "))
	st.Pools = append(st.Pools, p)
	st.Overrides = append(st.Overrides,
		Override{Resolver: "retired-resolver-99.west.example.net", VIP: "dns-v6-west-decommissioned", Action: "disable",
			Reason: "decommissioned with the west data center; kept until the config cleanup in change CHG-2025-1234 lands everywhere",
			Set:    now.Add(-400 * 24 * time.Hour), By: "uid 1000 (alice) via lbctl on lb-west-01.example.net", Orphaned: true},
		Override{Resolver: "gone-resolver-17.east.example.net", Pool: "datacenter-east-recursive-old", Action: "drain",
			Reason: strings.Repeat("long reason without spaces-", 8), Set: now.Add(-time.Hour), By: "uid 0", Orphaned: true})
	certDays, loss := 3, 33.3
	var members []GSLBMember
	for i := range 6 {
		members = append(members, GSLBMember{
			Name: fmt.Sprintf("frontend-%02d.eu-central-1.example.net", i), Address: fmt.Sprintf("2001:db8:ffff:%x::443", i),
			ProbeAddress: fmt.Sprintf("2001:db8:eeee:%x::8443", i), Weight: 100, Priority: 10, State: "down", Since: now.Add(-time.Minute),
			Reason: "https-health-check: certificate for frontend.example.net expires in 3 days; icmp: 33.3% loss over 30 probes; tcp-443: connection refused",
			Monitors: []GSLBMonitor{
				{Check: "https-health-check", Kind: "https", State: "down", Since: now.Add(-time.Minute), LastProbe: now.Add(-time.Second),
					LastResult: "GET https://[2001:db8:eeee::8443]/healthz: 503 Service Unavailable (want 200): body \"draining for maintenance\"", RTTMillis: 1234.5, Facts: []Fact{{Name: "cert_days_left", Value: float64(certDays)}}},
				{Check: "icmp-reachability", Kind: "icmp", State: "down", LastResult: "10 of 30 echo requests lost", Facts: []Fact{{Name: "loss_percent", Value: loss}, {Name: "socket", Text: "unprivileged datagram"}}},
			},
		})
	}
	st.GSLB = []GSLBPool{{Name: "www-global-anycast-frontends", Combine: "at_least", AtLeast: 2, Up: 0, Total: 6, Members: members}}
	st.Fleet = &FleetEtcd{Since: now.Add(-3 * time.Minute), IntentRevision: 123456, IntentSource: IntentFromLocalCopy,
		Error: "context deadline exceeded: no etcd member of https://etcd-1.datacenter-east.example.net:2379, https://etcd-2.datacenter-east.example.net:2379 answered"}
	st.Daemon.DryRun, st.Daemon.LastReloadError = true, "datacenter-east.toml:123: pools[2].members[7]: resolver \"unbound-resolver-44.east.example.net\" is not defined"
	return st
}

// TestPageLayoutInBrowser renders the status page with the longest
// realistic texts in Debian's Chromium at 390 px (a phone), 1280 px and
// 1920 px, driven over the DevTools protocol, and checks from the live
// page that nothing overflows horizontally (no scrollbar pushing the pool
// counts off-screen; a wide table scrolls inside itself), that every state
// cell is on screen without scrolling sideways, and that the texts that
// matter are on it.
func TestPageLayoutInBrowser(t *testing.T) {
	browser.Require(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	st := longestStatus(now)
	events := NewEventLog(100, func() time.Time { return now })
	for i := range 30 {
		events.Append(Event{Time: now.Add(-time.Duration(i) * time.Minute), Kind: EventState,
			Subject: "gslb:www-global-anycast-frontends/frontend-05.eu-central-1.example.net/https-health-check",
			Message: "up to down: GET https://[2001:db8:eeee::8443]/healthz: 503 Service Unavailable (want 200): body \"draining for maintenance\"", Error: i%3 == 0})
	}
	srv := httptest.NewServer(NewStatusServer(StatusOptions{Backend: &fakeBackend{status: st}, Refresh: time.Hour,
		Now: func() time.Time { return now }, Events: events}).Handler())
	t.Cleanup(srv.Close)

	for _, width := range []int{390, 1280, 1920} {
		t.Run(fmt.Sprint(width), func(t *testing.T) { layoutAt(t, srv.URL+"/", width) })
	}
}

// layoutAt checks the page at url in a window width px wide.
func layoutAt(t *testing.T, url string, width int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := browser.Measure(ctx, url, width, 900)
	if err != nil {
		t.Fatal(err)
	}
	if l.ClientWidth < width-80 || l.ClientWidth > width {
		t.Errorf("client width %d px, want the %d px window (less a scrollbar)", l.ClientWidth, width)
	}
	if l.Overflows() {
		t.Errorf("page overflows at %d px: scroll width %d > client width %d; elements past the edge: %q",
			width, l.ScrollWidth, l.ClientWidth, l.Overflowing)
	}
	if len(l.OffScreen) > 0 {
		t.Errorf("at %d px, state cells are off-screen: %q", width, l.OffScreen)
	}
	if width <= 640 && len(l.Scrolling) > 0 {
		t.Errorf("at %d px, tables scroll sideways: %q", width, l.Scrolling)
	}
	for _, want := range []string{
		"FAIL-OPEN: pool datacenter-east-recursive fails open: every member fails its check at once",
		"upstream-failure",
		"0 / 11 / 12", // healthy / enabled / total, on screen
		"unbound 0/2", // the last vendor count
		"ORPHANED",    // orphaned overrides
		"computed, not applied",
		"www-global-anycast-frontends",
		"frontend-05.eu-central-1.example.net",
		"Recent events",
		"Legend:",
		"FLEET: etcd UNREACHABLE since 3m ago",
	} {
		if !strings.Contains(l.Text, want) {
			t.Errorf("rendered text lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("rendered text:\n%s", l.Text)
	}
	shot := filepath.Join(browser.ArtifactDir(t), fmt.Sprintf("status-page-longest-%d.png", width))
	if err := browser.Screenshot(ctx, url, shot, width, 900); err != nil {
		t.Errorf("screenshot: %v", err)
	} else {
		t.Logf("screenshot: %s", shot)
	}
}

// pageAt1280 serves the status page of st at now, measures it in
// Debian's Chromium at 1280 px, fails t when it overflows, and returns
// the layout and the page's URL (served until the test ends).
func pageAt1280(t *testing.T, st *Status, now time.Time) (browser.Layout, string) {
	t.Helper()
	srv := httptest.NewServer(NewStatusServer(StatusOptions{Backend: &fakeBackend{status: st}, Refresh: time.Hour,
		Now: func() time.Time { return now }}).Handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := browser.Measure(ctx, srv.URL+"/", 1280, 900)
	if err != nil {
		t.Fatal(err)
	}
	if l.Overflows() {
		t.Errorf("page overflows at 1280 px: scroll width %d > client width %d; elements past the edge: %q", l.ScrollWidth, l.ClientWidth, l.Overflowing)
	}
	return l, srv.URL + "/"
}
