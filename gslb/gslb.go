// Package gslb is intelligent resolution: the GSLB members of the
// configuration ([gslb]) and their health — the monitor targets that probe
// them (one per pool, member and monitor) and the pure evaluation of each
// member's state from its monitors' facts under its pool's combine rule —
// and the answer selection: a Snapshot, immutable and built from the
// configuration, the members' states, a Locator (package gslb/topology)
// and a serial, answers each Query (zones, static records, dynamic names:
// policies most specific first, pools and their algorithms, fallback
// chains, last resorts) without allocating. The DNS server on the wire is
// package responder.
package gslb

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/health"
	"lbdns/monitor"
)

// MonitorKind is the monitor.Key.Kind of the health targets of GSLB
// members.
const MonitorKind = "gslb"

// DNSPort is the port probed by a monitor of kind "dns": a member's
// address has no port, and the other kinds take theirs from their
// settings.
const DNSPort = 53

// MonitorKey is the monitor's key of the target that probes member of
// pool with the check profile monitor.
func MonitorKey(pool, member, monitorName string) monitor.Key {
	return monitor.Key{Kind: MonitorKind, Owner: pool, Member: member, Check: monitorName}
}

// ProbeAddrPort is the address a monitor of profile chk probes for a
// member whose probe address is a: port 53 for kind "dns", else port 0
// (the checker takes the port from its settings).
func ProbeAddrPort(chk *configs.Check, a netip.Addr) netip.AddrPort {
	if chk != nil && chk.Kind == "dns" {
		return netip.AddrPortFrom(a, DNSPort)
	}
	return netip.AddrPortFrom(a, 0)
}

// BuildChecker builds the checker of one health target: an address
// probed under a check profile.
type BuildChecker func(chk *configs.Check, addr netip.AddrPort) (check.Checker, error)

// Targets lists the health targets of cfg's GSLB members: one per (pool,
// member, monitor), keyed by MonitorKey, probing the member's probe
// address (its address unless probe_address is set), each with its
// checker built once by build; a target's Addr is the address its
// checker says it probes (check.Addressed), port included. A target whose checker cannot be built is
// left out and named in the error; the others are returned all the same.
func Targets(cfg *configs.Config, build BuildChecker) ([]monitor.Target, error) {
	n := 0
	for i := range cfg.GSLB.Pools {
		p := &cfg.GSLB.Pools[i]
		for j := range p.Members {
			n += len(p.MemberMonitors(&p.Members[j]))
		}
	}
	out := make([]monitor.Target, 0, n)
	var errs []error
	// A profile's identity and schedule are worked out once per reload,
	// not once per member: 50,000 members of one monitor are one
	// ProbeIdentity (a JSON encoding).
	profiles := make(map[string]profile)
	for i := range cfg.GSLB.Pools {
		p := &cfg.GSLB.Pools[i]
		for j := range p.Members {
			m := &p.Members[j]
			for _, name := range p.MemberMonitors(m) {
				pr, ok := profiles[name]
				if !ok {
					pr = newProfile(cfg.Checks[name])
					profiles[name] = pr
				}
				if pr.chk == nil {
					continue
				}
				addr := ProbeAddrPort(pr.chk, m.ProbeAddr)
				c, err := build(pr.chk, addr)
				if err != nil {
					errs = append(errs, fmt.Errorf("gslb pool %s, member %s, monitor %s: %w", p.Name, m.Name, name, err))
					continue
				}
				if a, ok := c.(check.Addressed); ok {
					addr = a.ProbeAddr() // with the port the check's settings give
				}
				out = append(out, monitor.Target{Key: MonitorKey(p.Name, m.Name, name), Addr: addr, Checker: c,
					Spec: pr.spec, Schedule: pr.sched})
			}
		}
	}
	return out, errors.Join(errs...)
}

// profile is what every target of one check profile shares.
type profile struct {
	chk   *configs.Check // nil: no such profile
	spec  string
	sched monitor.Schedule
}

// newProfile returns the shared part of the targets of chk (nil: none).
func newProfile(chk *configs.Check) profile {
	if chk == nil {
		return profile{}
	}
	return profile{chk: chk, spec: chk.ProbeIdentity(), sched: monitor.Schedule{Interval: chk.Interval.Duration,
		FastInterval: chk.FastInterval.Duration, Timeout: chk.Timeout.Duration, Rise: chk.Rise, Fall: chk.Fall}}
}

// PoolState is the evaluated health of one GSLB pool.
type PoolState struct {
	// Name, Combine and AtLeast are the pool's settings; AtLeast is the
	// number of monitors a member needs up (with "all", 0).
	Name    string
	Combine string
	AtLeast int
	// Up counts the members that are up; Total all members.
	Up, Total int
	// Members in configuration order.
	Members []MemberState
}

// MemberState is the evaluated health of one member.
type MemberState struct {
	// Name, Addr, ProbeAddr, Weight and Priority are the member's
	// settings (ProbeAddr is Addr when no probe_address is set).
	Name      string
	Addr      netip.Addr
	ProbeAddr netip.Addr
	Weight    int
	Priority  int
	// State combines the monitors' states under the pool's rule: with
	// need = the monitors for "all", at_least for "at_least", up when at
	// least need monitors are up, down when fewer than need can still be
	// up (up + unknown < need), unknown otherwise, so a member whose
	// monitors have no verdict yet is unknown, never down.
	State health.State
	// Since is when the member has been in State at the latest, from its
	// monitors' since: the moment enough of them agreed.
	Since time.Time
	// ForcedBy names who forced State (Forced.By; Reason is then the
	// forcer's), "" when the monitors decided it.
	ForcedBy string
	// Reason says in one line why: how many monitors are up against the
	// number needed, and the monitors down (with their last failure) and
	// without a verdict.
	Reason string
	// Monitors in the order the member's monitor list names them.
	Monitors []MonitorState
}

// MonitorState is what one monitor knows of one member.
type MonitorState struct {
	// Check is the monitor's check profile; Kind its kind.
	Check string
	Kind  string
	// Key is the monitor target's key; Addr the probed address.
	Key  monitor.Key
	Addr netip.AddrPort
	// Known is false when the monitor has no target (not started yet,
	// or its checker could not be built): State is Unknown.
	Known bool
	// State and Since are the target's health state and when it was
	// entered.
	State health.State
	Since time.Time
	// Last is the last check result (with the kind's typed extras), at
	// LastAt (zero before the first).
	Last   check.Result
	LastAt time.Time
	// FailReason is the detail of the last failed check ("" when none).
	FailReason string
}

// Forced is a member state set from outside its monitors (the fleet's
// verdict, as gdnsd's forced state): Evaluate takes it in place of the
// state the monitors would give, and keeps the monitors' own facts
// beside it.
type Forced struct {
	// State is the forced state (Up or Down; Unknown forces nothing).
	State health.State
	// Since is when the member entered State, as the forcer says.
	Since time.Time
	// By names who forces it ("fleet"); Reason says why, in one line.
	By, Reason string
}

// ForcedStates are the forced member states, by MemberKey. Nil forces
// nothing.
type ForcedStates map[string]Forced

// MemberKey is a member's name across pools: "POOL/MEMBER".
func MemberKey(pool, member string) string { return pool + "/" + member }

// Evaluate returns the state of every GSLB pool of cfg, in configuration
// order, from the monitor's statuses (by key; a missing target counts as
// unknown). It is pure: now is only the time of a member without any
// monitor status.
func Evaluate(cfg *configs.Config, statuses map[monitor.Key]monitor.TargetStatus, now time.Time) []PoolState {
	return EvaluateForced(cfg, statuses, nil, now)
}

// EvaluateForced is Evaluate with the members of forced in the state it
// forces on them (their monitors' states and facts kept as they are).
func EvaluateForced(cfg *configs.Config, statuses map[monitor.Key]monitor.TargetStatus, forced ForcedStates, now time.Time) []PoolState {
	out := make([]PoolState, 0, len(cfg.GSLB.Pools))
	reasons := map[reasonKey]string{} // the reasons without a monitor named, made once
	for i := range cfg.GSLB.Pools {
		p := &cfg.GSLB.Pools[i]
		ps := PoolState{Name: p.Name, Combine: p.Combine, Total: len(p.Members), Members: make([]MemberState, 0, len(p.Members))}
		if p.Combine == configs.CombineAtLeast {
			ps.AtLeast = p.AtLeast
		}
		// One array for the monitors of the pool's members, each member
		// a capped slice of it.
		n := 0
		for j := range p.Members {
			n += len(p.MemberMonitors(&p.Members[j]))
		}
		mons := make([]MonitorState, 0, n)
		for j := range p.Members {
			var ms MemberState
			ms, mons = evaluateMember(cfg, p, &p.Members[j], statuses, now, mons, reasons)
			if f, ok := forced[MemberKey(p.Name, p.Members[j].Name)]; ok && f.State != health.Unknown {
				ms.State, ms.Since, ms.Reason, ms.ForcedBy = f.State, f.Since, f.Reason, f.By
				if ms.Since.IsZero() {
					ms.Since = now
				}
			}
			if ms.State == health.Up {
				ps.Up++
			}
			ps.Members = append(ps.Members, ms)
		}
		out = append(out, ps)
	}
	return out
}

// reasonKey is what a reason without a monitor down or unknown says.
type reasonKey struct {
	up, total, need int
	combine         string
}

// evaluateMember combines the monitors of member m of pool p. Its
// Monitors are appended to mons (returned), capped; reasons holds the
// reasons already made that name no monitor.
func evaluateMember(cfg *configs.Config, p *configs.GSLBPool, m *configs.GSLBMember, statuses map[monitor.Key]monitor.TargetStatus, now time.Time,
	mons []MonitorState, reasons map[reasonKey]string) (MemberState, []MonitorState) {
	ms := MemberState{Name: m.Name, Addr: m.Addr, ProbeAddr: m.ProbeAddr, Weight: m.Weight, Priority: m.Priority}
	names := p.MemberMonitors(m)
	var upBuf, downBuf [4]time.Time
	upSince, downSince := upBuf[:0], downBuf[:0]
	first := len(mons)
	var down, unknown []string
	latest := time.Time{}
	for _, name := range names {
		chk := cfg.Checks[name]
		key := MonitorKey(p.Name, m.Name, name)
		mon := MonitorState{Check: name, Key: key, Addr: ProbeAddrPort(chk, m.ProbeAddr)}
		if chk != nil {
			mon.Kind = chk.Kind
		}
		if ts, ok := statuses[key]; ok {
			mon.Known = true
			mon.Addr = ts.Addr
			mon.State, mon.Since = ts.Health.State, ts.Health.Since
			mon.Last, mon.LastAt = ts.Last, ts.LastAt
			mon.FailReason = ts.Health.LastFailReason
		}
		switch mon.State {
		case health.Up:
			upSince = append(upSince, mon.Since)
		case health.Down:
			downSince = append(downSince, mon.Since)
			why := mon.FailReason
			if why == "" {
				why = mon.Last.Detail
			}
			down = append(down, name+" ("+why+")")
		default:
			what := "no verdict yet"
			if !mon.Known {
				what = "not monitored"
			}
			unknown = append(unknown, name+" ("+what+")")
		}
		if mon.Known && mon.Since.After(latest) {
			latest = mon.Since
		}
		mons = append(mons, mon)
	}
	if len(mons) > first {
		ms.Monitors = mons[first:len(mons):len(mons)]
	}

	need := len(names)
	if p.Combine == configs.CombineAtLeast {
		need = p.AtLeast
	}
	switch {
	case len(names) > 0 && len(upSince) >= need:
		ms.State, ms.Since = health.Up, nth(upSince, need)
	case len(upSince)+len(unknown) < need:
		// Down needs more than len(names)-need monitors down.
		ms.State, ms.Since = health.Down, nth(downSince, len(names)-need+1)
	default:
		ms.State, ms.Since = health.Unknown, latest
	}
	if ms.Since.IsZero() {
		ms.Since = now
	}
	if len(down) == 0 && len(unknown) == 0 {
		k := reasonKey{len(upSince), len(names), need, p.Combine}
		if ms.Reason = reasons[k]; ms.Reason == "" {
			ms.Reason = reason(k.up, k.total, k.need, k.combine, nil, nil)
			reasons[k] = ms.Reason
		}
	} else {
		ms.Reason = reason(len(upSince), len(names), need, p.Combine, down, unknown)
	}
	return ms, mons
}

// nth returns the n-th earliest of times (1-based): the moment the n-th
// monitor entered the state they share, or zero when there are fewer.
func nth(times []time.Time, n int) time.Time {
	if n < 1 || n > len(times) {
		return time.Time{}
	}
	if len(times) == 1 {
		return times[0] // one monitor: the common case, without a copy
	}
	s := slices.Clone(times)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	return s[n-1]
}

// reason is the one-line explanation of a member's state.
func reason(up, total, need int, combine string, down, unknown []string) string {
	var b strings.Builder
	if combine == configs.CombineAtLeast {
		b.WriteString(strconv.Itoa(up) + " of " + strconv.Itoa(total) + " monitors up (at least " + strconv.Itoa(need) + " needed)")
	} else {
		b.WriteString(strconv.Itoa(up) + " of " + strconv.Itoa(total) + " monitors up (all needed)")
	}
	if len(down) > 0 {
		b.WriteString("; down: " + strings.Join(down, ", "))
	}
	if len(unknown) > 0 {
		b.WriteString("; unknown: " + strings.Join(unknown, ", "))
	}
	return b.String()
}
