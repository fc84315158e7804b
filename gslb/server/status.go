package server

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/gslb"
)

// Degrading is implemented by snapshots that can list the names answering
// only by their last resort: the responder then shows them in its status
// and logs and events each change loudly.
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
// listens, the serial and zones served, the last build and the names
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

// lastResortEach is the most names starting (or stopping) to answer by
// their last resort in one change that are logged and evented one by
// one; a bigger change (the warm-up of thousands of names of one
// service) is logged and evented once per type, last resort and warm-up
// (lastResortGroup), with the count and the first names.
const lastResortEach = 16

// noteDegraded makes the degraded names of snap (nil: none, the responder
// is off) the ones in force, and logs and events every name that starts
// or stops answering by its last resort (a change of last resort, or the
// end of the warm-up, starts it anew), one by one or, beyond
// lastResortEach names, by group. Called under r.mu.
func (r *Responder) noteDegraded(snap gslb.Answerer) {
	var now []gslb.NameStatus
	if d, ok := snap.(Degrading); ok {
		now = d.Degraded()
	}
	at := r.o.Now()
	prev := make(map[lastResortKey]lastResort, len(r.degraded))
	for _, d := range r.degraded {
		prev[lastResortKey{d.Name, d.Type}] = d
	}
	next := make([]lastResort, 0, len(now))
	var started []int32 // indices in now: a warm-up starts every name
	for i, ns := range now {
		k := lastResortKey{ns.Name, ns.Type}
		old, was := prev[k]
		delete(prev, k)
		if was && old.NameStatus == ns {
			next = append(next, old)
			continue
		}
		next = append(next, lastResort{NameStatus: ns, since: at})
		started = append(started, int32(i))
	}
	var stopped []int32 // indices in r.degraded, in their order
	for i, d := range r.degraded {
		if _, gone := prev[lastResortKey{d.Name, d.Type}]; gone {
			stopped = append(stopped, int32(i))
		}
	}
	if len(started) <= lastResortEach {
		for _, i := range started {
			r.lastResortStarted(now[i], at)
		}
	} else {
		r.lastResortGroup(len(started), func(i int) gslb.NameStatus { return now[started[i]] }, true, at)
	}
	if len(stopped) <= lastResortEach {
		for _, i := range stopped {
			r.lastResortStopped(r.degraded[i].NameStatus, at)
		}
	} else {
		r.lastResortGroup(len(stopped), func(i int) gslb.NameStatus { return r.degraded[stopped[i]].NameStatus }, false, at)
	}
	r.degraded = next
	if r.metrics != nil {
		r.metrics.setLastResorts(now)
	}
}

// lastResortShown is the number of names a grouped line and event name.
const lastResortShown = 5

// lastResortGroup logs and events the n names of list (list(i) the
// i-th) starting (started) or stopping to answer by their last resort:
// once per type, last resort and warm-up, in the order of their first
// name, at the level of lastResortStarted and lastResortStopped, with
// the count and the first lastResortShown names.
func (r *Responder) lastResortGroup(n int, list func(int) gslb.NameStatus, started bool, at time.Time) {
	type groupKey struct {
		typ        uint16
		lastResort string
		warming    bool
	}
	type group struct {
		count int
		first []string // the first lastResortShown names
	}
	var order []groupKey
	groups := map[groupKey]*group{}
	for i := range n {
		ns := list(i)
		k := groupKey{ns.Type, ns.LastResort, ns.Warming && started}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.count++
		if len(g.first) < lastResortShown {
			g.first = append(g.first, ns.Name)
		}
	}
	for _, k := range order {
		g := groups[k]
		count, names := g.count, g.first
		typ := dns.TypeToString[k.typ]
		shown := strings.Join(names, ", ")
		if count > len(names) {
			shown += fmt.Sprintf(" and %d more", count-len(names))
		}
		subject := fmt.Sprintf("%d names/%s", count, typ)
		if !started {
			r.log.Info("gslb names no longer answer by their last resort", "names", count, "type", typ, "was", k.lastResort, "first", names[0])
			if r.o.Events != nil {
				r.o.Events.Append(control.Event{Time: at, Kind: control.EventLastResort, Subject: subject,
					Message: fmt.Sprintf("%d names %s no longer answer by their last resort (%s): %s", count, typ, k.lastResort, shown)})
			}
			continue
		}
		level, loud := slog.LevelError, true
		msg := fmt.Sprintf("%d names %s answer by their last resort (%s): no pool of their policies has a member up: %s", count, typ, k.lastResort, shown)
		switch {
		case k.warming:
			level, loud = slog.LevelWarn, false
			msg = fmt.Sprintf("%d names %s answer by their last resort (%s) while their members are warming (no verdict yet): %s", count, typ, k.lastResort, shown)
		case k.lastResort == gslb.TraceStatic:
			level, loud = slog.LevelWarn, false
		}
		r.log.Log(context.Background(), level, "gslb names answer by their last resort", "names", count, "type", typ, "last_resort", k.lastResort, "warming", k.warming, "first", names[0])
		if r.o.Events != nil {
			r.o.Events.Append(control.Event{Time: at, Kind: control.EventLastResort, Subject: subject, Message: msg, Error: loud})
		}
	}
}

// lastResortStarted logs and events ns starting to answer by its last
// resort: an error for fail-open and servfail, a warning for static
// records and while members are warming.
func (r *Responder) lastResortStarted(ns gslb.NameStatus, at time.Time) {
	typ := dns.TypeToString[ns.Type]
	level, loud := slog.LevelError, true
	msg := fmt.Sprintf("%s %s answers by its last resort (%s): no pool of its policies has a member up", ns.Name, typ, ns.LastResort)
	switch {
	case ns.Warming:
		level, loud = slog.LevelWarn, false
		msg = fmt.Sprintf("%s %s answers by its last resort (%s) while its members are warming (no verdict yet)", ns.Name, typ, ns.LastResort)
	case ns.LastResort == gslb.TraceStatic:
		level, loud = slog.LevelWarn, false
	}
	r.log.Log(context.Background(), level, "gslb name answers by its last resort", "name", ns.Name, "type", typ, "last_resort", ns.LastResort, "warming", ns.Warming)
	if r.o.Events != nil {
		r.o.Events.Append(control.Event{Time: at, Kind: control.EventLastResort, Subject: ns.Name + "/" + typ, Message: msg, Error: loud})
	}
}

// lastResortStopped logs and events ns no longer answering by its last
// resort.
func (r *Responder) lastResortStopped(ns gslb.NameStatus, at time.Time) {
	typ := dns.TypeToString[ns.Type]
	r.log.Info("gslb name no longer answers by its last resort", "name", ns.Name, "type", typ, "was", ns.LastResort)
	if r.o.Events != nil {
		r.o.Events.Append(control.Event{Time: at, Kind: control.EventLastResort, Subject: ns.Name + "/" + typ,
			Message: fmt.Sprintf("%s %s no longer answers by its last resort (%s)", ns.Name, typ, ns.LastResort)})
	}
}
