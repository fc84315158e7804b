package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/control"
)

// fleetEtcd is the node's link to etcd for status (nil without [fleet]).
func (d *Daemon) fleetEtcd() *control.FleetEtcd {
	if d.fleet == nil || d.fleet.link == nil {
		return nil
	}
	return d.fleet.link.State()
}

// fleetLossMetrics are the gauges of the node's link to etcd.
func (d *Daemon) fleetLossMetrics() []prometheus.Collector {
	reachable := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_etcd_reachable",
		Help: "1 while this node reaches the fleet's etcd, 0 while it cannot (it then serves the intent it applied last and refuses intent changes).",
	}, func() float64 {
		if e := d.fleetEtcd(); e != nil && e.Reachable {
			return 1
		}
		return 0
	})
	since := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_etcd_unreachable_seconds",
		Help: "How long this node has been unable to reach the fleet's etcd (0 while it reaches it).",
	}, func() float64 {
		if e := d.fleetEtcd(); e != nil && !e.Reachable {
			return d.now().Sub(e.Since).Seconds()
		}
		return 0
	})
	return []prometheus.Collector{reachable, since}
}
