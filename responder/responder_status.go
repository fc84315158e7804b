package responder

import (
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/gslb"
)

// Degrading is implemented by snapshots that can list the names answering
// only by their last resort: the responder then shows them in its status
// and publishes them to the hub, whose follower journals each change.
type Degrading interface {
	// Degraded lists the names and types answering by their last resort.
	Degraded() []gslb.NameStatus
}

// lastResortKey is a name and type of a snapshot.
type lastResortKey struct {
	name string
	typ  uint16
}

// lastResort is a name and type on its last resort since a time.
type lastResort struct {
	gslb.NameStatus
	since time.Time
}

// Status returns the responder's state for the status views: where it
// listens (its encrypted fronts too), the serial and zones served, the last build and the names
// answering by their last resort. Nil when r is nil or has never been
// configured with [gslb.server] listen addresses or zones.
func (r *Responder) Status() *control.GSLBResponder {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg == nil || len(r.cfg.GSLB.Server.ListenAddrs) == 0 && len(r.cfg.GSLB.Zones) == 0 {
		return nil
	}
	st := &control.GSLBResponder{On: r.srv != nil, Listen: []string{}, ListenError: r.listenErr, Serial: r.serial, Zones: []string{},
		LastBuild: r.built, LastBuildError: r.buildErr, LastResort: []control.GSLBLastResort{}}
	if r.srv != nil {
		for _, a := range r.srv.Addrs() {
			st.Listen = append(st.Listen, a.String())
		}
		st.Fronts = r.srv.FrontStatus()
	}
	if z, ok := r.snap.(Zoned); ok {
		st.Zones = append(st.Zones, z.Zones()...)
	}
	for _, d := range r.degraded {
		st.LastResort = append(st.LastResort, control.GSLBLastResort{Name: d.Name, Type: dns.TypeToString[d.Type],
			LastResort: d.LastResort, Warming: d.Warming, Since: d.since})
	}
	st.Listeners = []control.GSLBListener{}
	for _, v := range r.stateLocked().Listeners {
		st.Listeners = append(st.Listeners, control.GSLBListener{Listen: v.Name, Serving: v.Serving, Reason: v.Reason})
	}
	return st
}

// noteDegraded makes the degraded names of snap (nil: none, the responder
// is off) the ones in force, each with the time it started answering by
// its last resort (a change of last resort, or the end of the warm-up,
// starts it anew). What changed is said by the journal, which follows the
// hub's Responder value. Called under r.mu.
func (r *Responder) noteDegraded(snap gslb.Answerer) {
	var now []gslb.NameStatus
	if d, ok := snap.(Degrading); ok {
		now = d.Degraded()
	}
	if r.metrics != nil {
		defer r.metrics.setLastResorts(now)
	}
	old := r.degraded
	if len(now) == len(old) && (len(now) == 0 || sameResorts(old, now)) {
		return // nothing changed: every one keeps its time
	}
	at := r.o.Now()
	// The lists come in the snapshots' order of names: the earlier one
	// is looked up by index while the two are in step, through a map
	// only from where they differ.
	var prev map[lastResortKey]lastResort
	next := make([]lastResort, 0, len(now))
	for i, ns := range now {
		var o lastResort
		was := false
		if prev == nil && i < len(old) && old[i].Name == ns.Name && old[i].Type == ns.Type {
			o, was = old[i], true
		} else {
			if prev == nil {
				prev = make(map[lastResortKey]lastResort, len(old))
				for _, d := range old {
					prev[lastResortKey{d.Name, d.Type}] = d
				}
			}
			o, was = prev[lastResortKey{ns.Name, ns.Type}]
		}
		if was && o.NameStatus == ns {
			next = append(next, o)
			continue
		}
		next = append(next, lastResort{NameStatus: ns, since: at})
	}
	r.degraded, r.lastResorts = next, now
	if len(now) == 0 {
		r.lastResorts = nil
	}
}

// sameResorts reports whether old and now list the same names and
// types on the same last resorts, in the same order.
func sameResorts(old []lastResort, now []gslb.NameStatus) bool {
	for i := range now {
		if old[i].NameStatus != now[i] {
			return false
		}
	}
	return true
}
