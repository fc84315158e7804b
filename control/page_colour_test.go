package control

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hue names the colour family of a CSS hex colour: green, red, amber,
// grey (or white, black) or other.
func hue(hex string) string {
	hex = strings.TrimPrefix(hex, "#")
	if len(hex) == 3 {
		hex = string([]byte{hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]})
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil || len(hex) != 6 {
		return "other"
	}
	r, g, b := int(v>>16), int(v>>8&0xff), int(v&0xff)
	switch {
	case max(r, g, b)-min(r, g, b) < 40:
		return "grey"
	case g > r && g > b:
		return "green"
	case r > 2*g && r > 2*b:
		return "red"
	case r > b && g > b && r >= g:
		return "amber"
	}
	return "other"
}

// cssColour returns the colour that the rule for selector in page.html
// gives: its background when it has one, else its text colour.
func cssColour(t *testing.T, selector string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^([^{}\n]*)\{([^}]*)\}`)
	for _, m := range re.FindAllStringSubmatch(pageHTML, -1) {
		for _, sel := range strings.Split(m[1], ",") {
			if strings.TrimSpace(sel) != selector {
				continue
			}
			if c := regexp.MustCompile(`background:\s*(#[0-9a-fA-F]+)`).FindStringSubmatch(m[2]); c != nil {
				return c[1]
			}
			if c := regexp.MustCompile(`(?:^|[ ;])color:\s*(#[0-9a-fA-F]+)`).FindStringSubmatch(m[2]); c != nil {
				return c[1]
			}
		}
	}
	t.Fatalf("page.html has no colour rule for %q", selector)
	return ""
}

// TestPageColours: every state on the page gets its colour from one of a
// few classes, and healthy is green, failing red, and nothing else red:
// an operator's drain or disable, a dry run, a state not known yet, a
// healthy GSLB member's reason ("1 of 1 monitors up") and a passing
// monitor's result ("connected").
func TestPageColours(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// The CSS class of each colour the page uses, and its family.
	classHue := map[string]string{
		"tr.state-up td.state": "green", "tr.state-down td.state": "red", "tr.state-unknown td.state": "grey",
		".ok": "green", ".bad": "red", ".err": "red", ".warn": "amber", ".muted": "grey",
		".diag-ok": "green", ".diag-warn": "amber", ".diag-crit": "red", ".diag-unknown": "grey",
		"td.why-in": "green", "td.why-held": "amber", "td.drained": "amber", "td.why-drained": "amber",
		"td.why-disabled": "grey", "td.why-unknown": "grey", "td.why-out": "red",
		".banner.crit": "red", ".banner.warn": "amber",
	}
	for sel, want := range classHue {
		if got := hue(cssColour(t, sel)); got != want {
			t.Errorf("%s is %s (%s), want %s", sel, got, cssColour(t, sel), want)
		}
	}
	// severity → the text class the template uses for it.
	text := map[string]string{"ok": ".ok", "warn": ".warn", "crit": ".bad", "unknown": ".muted"}

	member := func(state string, fresh bool, why, override string) Member {
		return Member{Resolver: "r-" + why, Vendor: "v-" + why, State: state, Fresh: fresh, Why: why, Override: override,
			InTraffic: why == WhyHealthy || why == WhyDrained || why == WhyHeldFailOpen}
	}
	for _, tc := range []struct {
		name                     string
		m                        Member
		state, why, vendor, pool string // CSS: state cell, why cell, vendor count, pool's healthy count
	}{
		{"healthy", member("up", true, WhyHealthy, "none"), "tr.state-up td.state", "td.why-in", "green", "green"},
		{"down", member("down", true, WhyDown, "none"), "tr.state-down td.state", "td.why-out", "red", "amber"},
		{"stale", member("up", false, WhyStale, "none"), "tr.state-up td.state", "td.why-out", "red", "amber"},
		{"no verdict yet", member("unknown", true, WhyNoVerdict, "none"), "tr.state-unknown td.state", "td.why-unknown", "amber", "amber"},
		{"drained, healthy", member("up", true, WhyDrained, "drain"), "tr.state-up td.state", "td.why-drained", "amber", "amber"},
		{"disabled, healthy", member("up", true, WhyDisabled, "disable"), "tr.state-up td.state", "td.why-disabled", "amber", "amber"},
		{"held by fail-open", member("down", true, WhyHeldFailOpen, "none"), "tr.state-down td.state", "td.why-held", "red", "amber"},
	} {
		t.Run("resolver "+tc.name, func(t *testing.T) {
			healthy := 0
			if tc.m.Why == WhyHealthy {
				healthy = 1
			}
			pl := Pool{Name: "p", Total: 1, Enabled: 1, Healthy: healthy, MinHealthy: 0, Members: []Member{tc.m},
				Vendors: []VendorCount{{Vendor: tc.m.Vendor, Total: 1, Healthy: healthy}}}
			v := buildPool(pl, now)
			mv := v.Members[0]
			if got := "tr.state-" + mv.StateClass + " td.state"; got != tc.state {
				t.Errorf("state cell %s, want %s", got, tc.state)
			}
			if got := "td.why-" + mv.WhyClass; got != tc.why {
				t.Errorf("why cell %s, want %s", got, tc.why)
			}
			if got := hue(cssColour(t, text[v.Vendors[0].Class])); got != tc.vendor {
				t.Errorf("vendor count %s (%s), want %s", got, v.Vendors[0].Class, tc.vendor)
			}
			if got := hue(cssColour(t, text[v.HealthyClass])); got != tc.pool {
				t.Errorf("pool healthy count %s (%s), want %s", got, v.HealthyClass, tc.pool)
			}
			if tc.m.Why == WhyDrained && !mv.Drained {
				t.Error("a drained member is shown in traffic as \"yes\", not as drained")
			}
		})
	}
	// A pool below its minimum is red.
	if v := buildPool(Pool{Name: "p", Total: 2, Healthy: 0, MinHealthy: 1}, now); v.HealthyClass != "crit" {
		t.Errorf("pool below its minimum: %s, want crit", v.HealthyClass)
	}

	for _, tc := range []struct {
		name        string
		m           GSLBMember
		reason, mon string // families of the member's reason and of its monitor's last result
	}{
		{"up", GSLBMember{Name: "m", State: "up", Reason: "1 of 1 monitors up (all needed)",
			Monitors: []GSLBMonitor{{Check: "c", Kind: "tcp", State: "up", LastProbe: now, LastResult: "connected", LastOK: true}}}, "green", "green"},
		{"down", GSLBMember{Name: "m", State: "down", Reason: "0 of 1 monitors up (all needed); down: c",
			Monitors: []GSLBMonitor{{Check: "c", Kind: "tcp", State: "down", LastProbe: now, LastResult: "connection refused"}}}, "red", "red"},
		{"unknown", GSLBMember{Name: "m", State: "unknown", Reason: "no verdict yet",
			Monitors: []GSLBMonitor{{Check: "c", Kind: "tcp", State: "unknown"}}}, "grey", ""},
	} {
		t.Run("gslb member "+tc.name, func(t *testing.T) {
			v := buildGSLBPool(GSLBPool{Name: "g", Combine: "all", Total: 1, Members: []GSLBMember{tc.m}}, now)
			if got := hue(cssColour(t, "."+v.Members[0].ReasonClass)); got != tc.reason {
				t.Errorf("reason %s (%s), want %s", got, v.Members[0].ReasonClass, tc.reason)
			}
			if tc.mon != "" {
				class := ".bad"
				if v.Members[0].Monitors[0].LastOK {
					class = ".ok"
				}
				if got := hue(cssColour(t, class)); got != tc.mon {
					t.Errorf("monitor result %s, want %s", got, tc.mon)
				}
			}
		})
	}
	for _, tc := range []struct {
		up, total int
		want      string
	}{{2, 2, "ok"}, {1, 2, "warn"}, {0, 2, "crit"}} {
		if v := buildGSLBPool(GSLBPool{Name: "g", Up: tc.up, Total: tc.total}, now); v.UpClass != tc.want {
			t.Errorf("GSLB pool %d/%d: %s, want %s", tc.up, tc.total, v.UpClass, tc.want)
		}
	}

	// VIP serving: yes green, no red, no in a dry run (nothing applied on
	// purpose) and no verdict yet grey.
	yes, no := true, false
	for _, tc := range []struct {
		serving *bool
		dryRun  bool
		want    string
	}{{&yes, false, "ok"}, {&no, false, "crit"}, {&no, true, "unknown"}, {nil, false, "unknown"}} {
		st := &Status{VIPs: []VIP{{Name: "v", Serving: tc.serving}}, Daemon: Daemon{DryRun: tc.dryRun}}
		if got := buildPage(st, now, "h", time.Second).VIPs[0].ServingClass; got != tc.want {
			t.Errorf("VIP serving %v dry run %v: %s, want %s", fmt.Sprint(tc.serving != nil && *tc.serving), tc.dryRun, got, tc.want)
		}
		// The page says the verdict itself: a VIP that does not serve is
		// never shown as serving.
		text := "-"
		if tc.serving != nil {
			text = map[bool]string{true: "yes", false: "no"}[*tc.serving]
		}
		_, page := renderPage(t, st, now, time.Second)
		contains(t, "page", page, `data-serving="`+text+`" data-serving-class="`+tc.want+`">`)
	}

	// On the rendered page: the dry run and an emergency switch are
	// amber banners, a last resort red.
	st := sampleStatus(now)
	st.Daemon.DryRun = true
	st.GSLBIntent = []GSLBIntent{{Kind: GSLBOff, Scope: "all", Reason: "r", By: "uid 0", Set: now}}
	st.GSLBResponder = &GSLBResponder{On: true, LastResort: []GSLBLastResort{{Name: "www.g.test.", Type: "A", LastResort: "fail-open"}}}
	_, page := renderPage(t, st, now, time.Second)
	contains(t, "page", page, `<div class="banner warn" id="dry-run">`, `<div class="banner warn gslb-off">`, `<div class="banner crit gslb-last-resort">`)
}
