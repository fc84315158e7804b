package monitoring

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goldens are the metric families lbdnsd exports, one a line ("NAME
// TYPE [LABELS]: HELP"): the daemon's (report), the GSLB responder's,
// the status endpoint's, the BGP announcer's, the client actions', the flood alarms'
// and the daemon's fleet families, each kept by a test of its package.
var goldens = []string{"../report/testdata/metrics.txt", "../responder/testdata/metrics.txt", "../control/testdata/metrics.txt",
	"../announce/testdata/metrics.txt", "../clientfw/testdata/metrics.txt", "../flood/testdata/metrics.txt",
	"../daemon/testdata/metrics.txt"}

// golden names the goldens in messages.
const golden = "report, responder, control, announce, clientfw, flood and daemon testdata/metrics.txt"

// metricLabels reads the goldens: metric name (and, for histograms, its
// _bucket, _sum and _count series) to its label names.
func metricLabels(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, g := range goldens {
		f, err := os.Open(g)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			name, rest, ok := strings.Cut(sc.Text(), " ")
			if !ok {
				continue
			}
			typ, rest, _ := strings.Cut(rest, " ")
			list, _, _ := strings.Cut(strings.TrimPrefix(rest, "["), "]")
			labels := strings.Fields(list)
			out[name] = labels
			if typ == "HISTOGRAM" {
				out[name+"_bucket"] = append(slices.Clone(labels), "le")
				out[name+"_sum"], out[name+"_count"] = labels, labels
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 40 {
		t.Fatalf("only %d metrics read from %s", len(out), golden)
	}
	return out
}

var metricName = regexp.MustCompile(`\blbdns_[a-z0-9_]+`)

// checkNames fails for each lbdns_ name in expr that lbdnsd does not
// export, and returns the names used.
func checkNames(t *testing.T, where, expr string, known map[string][]string) []string {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	for _, n := range names {
		if _, ok := known[n]; !ok {
			t.Errorf("%s: metric %s is not exported by lbdnsd (%s)", where, n, golden)
		}
	}
	return names
}

// requireTool returns the path of tool, skipping the test when it is
// missing unless LBDNS_REQUIRE_PACKAGING=1 (scripts/test.sh) makes that a
// failure.
func requireTool(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("LBDNS_REQUIRE_PACKAGING") == "1" {
			t.Fatalf("%s not found (Debian package %s; scripts/install-test-deps.sh installs it)", tool, pkg)
		}
		t.Skipf("%s not found (Debian package %s); set LBDNS_REQUIRE_PACKAGING=1 to fail instead", tool, pkg)
	}
	return p
}

// TestAlertRules runs promtool over alerts.yml: the rules parse, and the
// unit tests of alerts_test.yml (each alert fires on its condition after
// its "for", and not on the healthy series beside it) pass.
func TestAlertRules(t *testing.T) {
	known := metricLabels(t)
	raw, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	used := checkNames(t, "alerts.yml", string(raw), known)
	for _, want := range []string{"lbdns_pool_fail_open", "lbdns_pool_diagnosis", "lbdns_backend_flaps_total", "lbdns_ipvs_failed_operations_total",
		"lbdns_config_last_reload_successful", "lbdns_prefetch_expired_total", "lbdns_gslb_member_state", "lbdns_gslb_certificate_days_left",
		"lbdns_gslb_last_resort_names", "lbdns_gslb_snapshot_builds_total", "lbdns_gslb_emergency", "lbdns_vip_serving", "lbdns_gslb_listener_serving",
		"lbdns_gslb_queries_total", "lbdns_gslb_transitions_total",
		"lbdns_bgp_peer_up", "lbdns_bgp_prefix_announced", "lbdns_fleet_etcd_reachable",
		"lbdns_backend_up", "lbdns_override_set_timestamp_seconds", "lbdns_client_action_oldest_set_timestamp_seconds"} {
		if !slices.Contains(used, want) {
			t.Errorf("alerts.yml has no rule over %s", want)
		}
	}
	// lbdnsd itself, seen by Prometheus under the scrape job the README
	// names.
	for _, want := range []string{`up{job="lbdns"} == 0`, `absent(up{job="lbdns"})`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("alerts.yml has no rule over %s", want)
		}
	}
	promtool := requireTool(t, "promtool", "prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		} else {
			t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

var legendLabel = regexp.MustCompile(`\{\{\s*([a-z_]+)\s*\}\}`)

// TestDashboard: grafana-lbdns.json is valid JSON, every query uses only
// metrics lbdnsd exports and every legend only labels those metrics carry
// (or the scrape's instance and job), panel ids are unique, and every
// exported metric is on the dashboard.
func TestDashboard(t *testing.T) {
	known := metricLabels(t)
	raw, err := os.ReadFile("grafana-lbdns.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("grafana-lbdns.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard without title, uid or panels: %q %q %d", d.Title, d.UID, len(d.Panels))
	}
	ids := map[int]string{}
	shown := map[string]bool{}
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panel id %d used by %q and %q", p.ID, prev, p.Title)
		}
		ids[p.ID] = p.Title
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := checkNames(t, "panel "+p.Title, tg.Expr, known)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q uses no lbdns metric", p.Title, tg.Expr)
			}
			labels := []string{"instance", "job"}
			for _, n := range names {
				shown[strings.TrimSuffix(n, "_bucket")] = true
				labels = append(labels, known[n]...)
			}
			for _, m := range legendLabel.FindAllStringSubmatch(tg.LegendFormat, -1) {
				if !slices.Contains(labels, m[1]) {
					t.Errorf("panel %q: legend %q names label %s, which %v do not have", p.Title, tg.LegendFormat, m[1], names)
				}
			}
		}
	}
	for n := range known {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if _, isHist := known[base+"_bucket"]; isHist && n != base {
			continue
		}
		if !shown[n] {
			t.Errorf("metric %s is on no panel of the dashboard", n)
		}
	}
}
