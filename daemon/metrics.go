package daemon

import (
	"lbdns/monitor"
	"lbdns/probes"
)

// observeProbe records one probe result (monitor.Options.OnResult).
func (d *Daemon) observeProbe(key monitor.Key, r probes.Result) {
	d.metrics.ObserveProbe(key.Check, r)
}

// countTransition counts the state change of ev.
func (d *Daemon) countTransition(ev monitor.Event) {
	d.metrics.Transition(ev.Key.Member, ev.Key.Check, ev.Transition.To)
}
