package responder

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/testkit/promgolden"
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
	promgolden.Check(t, "the GSLB responder", promgolden.Lines(t, reg))
}
