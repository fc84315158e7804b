// Package promgolden keeps the metric families a package exports in a
// golden file, one a line ("NAME TYPE [LABELS]: HELP"), which the
// dashboard and alert tests of package monitoring read: a family renamed,
// relabelled or dropped fails the test of the package that exports it.
package promgolden

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Lines returns one line per family g gathers, sorted: its name, type,
// the label names of its first series and its help.
func Lines(t testing.TB, g prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		var labels []string
		if ms := mf.GetMetric(); len(ms) > 0 {
			for _, lp := range ms[0].GetLabel() {
				labels = append(labels, lp.GetName())
			}
		}
		lines = append(lines, mf.GetName()+" "+mf.GetType().String()+" ["+strings.Join(labels, " ")+"]: "+mf.GetHelp())
	}
	slices.Sort(lines)
	return lines
}

// Check fails t unless lines are testdata/metrics.txt; with
// LBDNS_UPDATE_GOLDEN set it writes them there first. what names the
// exporter in the message.
func Check(t testing.TB, what string, lines []string) {
	t.Helper()
	if len(lines) == 0 {
		t.Fatalf("%s exports no metric family", what)
	}
	text := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join("testdata", "metrics.txt")
	if os.Getenv("LBDNS_UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != text {
		t.Errorf("the metric families of %s changed; the dashboard and alert rules depend on them (LBDNS_UPDATE_GOLDEN=1 rewrites %s):\ngot:\n%s\nwant:\n%s", what, golden, text, b)
	}
}
