package daemon

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/hub"
	"lbdns/internal/promgolden"
)

// TestFleetMetricFamilies keeps the fleet's metric families (registered
// with [fleet] only) in testdata/metrics.txt, which the monitoring tests
// read.
func TestFleetMetricFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := &Daemon{registry: reg, now: time.Now, hub: hub.New(func() hub.Facts { return nil }),
		fleet: &fleetNode{cfg: &configs.Fleet{Name: "a"}}}
	if err := d.registerFleetMetrics(); err != nil {
		t.Fatal(err)
	}
	promgolden.Check(t, "the daemon's fleet", promgolden.Lines(t, reg))
}
