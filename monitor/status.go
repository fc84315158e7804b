package monitor

import (
	"maps"
	"slices"
)

// Status returns the status of every current target by key.
func (m *Monitor) Status() map[Key]TargetStatus {
	m.mu.Lock()
	ts := make([]*target, 0, len(m.targets))
	for _, t := range m.targets {
		ts = append(ts, t)
	}
	m.mu.Unlock()
	out := make(map[Key]TargetStatus, len(ts))
	for _, t := range ts {
		out[t.key] = t.status()
	}
	return out
}

// Each calls fn with the status of every current target, in no particular
// order. Unlike Status it builds no map: a caller that reads every target
// often (the daemon, once a second) allocates nothing per target. fn runs
// without the monitor's lock held.
func (m *Monitor) Each(fn func(TargetStatus)) {
	m.each("", fn)
}

// EachKind is Each for the targets whose Key.Kind is kind only: the
// others' statuses are not even copied, so that a caller that reads one
// kind often (the daemon's tick reads the resolver targets once a second)
// pays nothing for thousands of targets of another kind (GSLB members).
func (m *Monitor) EachKind(kind string, fn func(TargetStatus)) {
	if kind == "" {
		return
	}
	m.each(kind, fn)
}

// OfKind returns a view of m's targets of kind only, for a reader of
// Each (resolvers.Facts): its Each is m.EachKind(kind, ...).
func (m *Monitor) OfKind(kind string) KindView { return KindView{m: m, kind: kind} }

// KindView is the targets of one kind of a Monitor (Monitor.OfKind).
type KindView struct {
	m    *Monitor
	kind string
}

// Each calls fn with the status of every current target of v's kind, as
// Monitor.EachKind does.
func (v KindView) Each(fn func(TargetStatus)) { v.m.EachKind(v.kind, fn) }

// each is Each over the targets of kind, or of every kind when kind is
// empty.
func (m *Monitor) each(kind string, fn func(TargetStatus)) {
	m.mu.Lock()
	var ts []*target
	if kind == "" {
		ts = slices.AppendSeq(make([]*target, 0, len(m.targets)), maps.Values(m.targets))
	} else {
		ts = slices.AppendSeq(make([]*target, 0, len(m.byKind[kind])), maps.Keys(m.byKind[kind]))
	}
	m.mu.Unlock()
	for _, t := range ts {
		fn(t.status())
	}
}

// status returns a copy of t's status.
func (t *target) status() TargetStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return TargetStatus{
		Key:           t.key,
		Addr:          t.addr,
		Interval:      t.sched.Interval,
		Timeout:       t.sched.Timeout,
		InFlightSince: t.probeStart,
		Health:        t.tracker.Snapshot(),
		Last:          t.last,
		LastAt:        t.lastAt,
		Hold:          t.hold,
	}
}
