package server

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// recorder is a Registerer that registers on reg and keeps what it was
// given.
type recorder struct {
	*prometheus.Registry
	got *[]prometheus.Collector
}

func (r recorder) Register(c prometheus.Collector) error {
	*r.got = append(*r.got, c)
	return r.Registry.Register(c)
}

var variableLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)

// touch makes every series family of c show in a Gather: a vector gets
// one child.
func touch(t *testing.T, c prometheus.Collector) {
	t.Helper()
	if f, ok := c.(folding); ok {
		c = f.Collector
	}
	ch := make(chan *prometheus.Desc, 16)
	c.Describe(ch)
	close(ch)
	for d := range ch {
		m := variableLabels.FindStringSubmatch(d.String())
		if m == nil || m[1] == "" {
			continue
		}
		values := make([]string, len(strings.Split(m[1], ",")))
		for i := range values {
			values[i] = "x"
		}
		switch v := c.(type) {
		case *prometheus.CounterVec:
			v.WithLabelValues(values...)
		case *prometheus.GaugeVec:
			v.WithLabelValues(values...)
		default:
			t.Fatalf("%T with labels: the test does not know how to show it", c)
		}
	}
}

// TestMetricFamilies: every family the responder exports, with its type,
// labels and help, is testdata/metrics.txt (which the dashboard and
// alert tests of package monitoring read beside report's);
// LBDNS_UPDATE_GOLDEN=1 rewrites it.
func TestMetricFamilies(t *testing.T) {
	var got []prometheus.Collector
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(recorder{reg, &got}); err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		touch(t, c)
	}
	mfs, err := reg.Gather()
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
	text := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join("testdata", "metrics.txt")
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
		t.Errorf("the responder's metric families changed; the dashboard and alert rules depend on them:\ngot:\n%s\nwant:\n%s", text, b)
	}
}
