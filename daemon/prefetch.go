package daemon

import "lbdns/prefetch"

// Prefetch returns the state of every prefetch entry (nil when the
// prefetcher is not running), for lbctl, metrics and the status page.
func (d *Daemon) Prefetch() []prefetch.Status {
	st, _ := d.pf.Status()
	return st
}
