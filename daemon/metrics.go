package daemon

import (
	"strings"

	"lbdns/monitor"
	"lbdns/probes"
)

// observeProbe records one probe result (monitor.Options.OnResult).
func (d *Daemon) observeProbe(targetID string, r probes.Result) {
	_, check, _ := strings.Cut(targetID, "/")
	d.metrics.ObserveProbe(check, r)
}

// countTransition counts the state change of ev.
func (d *Daemon) countTransition(ev monitor.Event) {
	res, check, _ := strings.Cut(ev.TargetID, "/")
	d.metrics.Transition(res, check, ev.Transition.To)
}
