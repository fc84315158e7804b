package control

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/testkit/promgolden"
)

// TestMetricFamilies: the families the status endpoint exports, with
// their type, labels and help, are testdata/metrics.txt (read by the
// dashboard and alert tests of package monitoring);
// LBDNS_UPDATE_GOLDEN=1 rewrites it.
func TestMetricFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewStatusServer(StatusOptions{Backend: &fakeBackend{}, Gatherer: reg, Registerer: reg})
	promgolden.Check(t, "the status endpoint", promgolden.Lines(t, reg))
}
