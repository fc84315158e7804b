package hub

import (
	"time"

	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/intent"
	"lbdns/monitor"
	"lbdns/resolvers"
	"lbdns/vip"
)

// Hub holds the state lbdnsd's parts share. Who publishes what:
//
//   - Config: the daemon, at start and on every reload it accepts.
//   - Facts: the monitor (Touch on every health-state change and target
//     update); built from its statuses when read.
//   - Forced: the fleet component, from the fleet's verdicts: the GSLB
//     member states forced over what this host's own monitors say.
//   - Intent: the daemon, after the store has saved (or delivered) a new
//     revision.
//   - Plan: the daemon's reconcile, after each planning round.
//   - GSLB: the GSLB responder, after each snapshot it swaps in.
//   - VIPs: the daemon's reconcile, from the table the kernel was given.
//   - Responder: the GSLB responder, on every change of its state.
//
// Who waits: the GSLB responder on Config, Facts, Forced and Intent; the
// prefetcher's feed on Plan; the journal on VIPs and Responder; status,
// metrics and the page Load what they show.
type Hub struct {
	// Config is the configuration in force.
	Config *Value[*configs.Config]
	// Facts is what the monitor knows of every target.
	Facts *Lazy[Facts]
	// Forced is the GSLB member states forced over the facts (the
	// fleet's verdicts; empty outside a fleet).
	Forced *Value[gslb.ForcedStates]
	// Intent is the operator intent in force and its store revision.
	Intent *Value[Intent]
	// Plan is the resolver pools' latest plan (verdicts and desired
	// IPVS table).
	Plan *Value[resolvers.Plan]
	// GSLB is the GSLB pools' states the answers in force were built from.
	GSLB *Value[GSLBPlan]
	// VIPs is whether each VIP of the configuration serves.
	VIPs *Value[[]Verdict]
	// Responder is the GSLB responder's state.
	Responder *Value[ResponderState]
}

// New returns a hub whose Facts are built by facts (the monitor's
// statuses, read when a reader asks for a version not yet built).
func New(facts func() Facts) *Hub {
	return &Hub{
		Config:    NewValue[*configs.Config](),
		Facts:     NewLazy(facts),
		Forced:    NewValue[gslb.ForcedStates](),
		Intent:    NewValue[Intent](),
		Plan:      NewValue[resolvers.Plan](),
		GSLB:      NewValue[GSLBPlan](),
		VIPs:      NewValue[[]Verdict](),
		Responder: NewValue[ResponderState](),
	}
}

// Facts are the monitor's statuses of every target, by key.
type Facts = map[monitor.Key]monitor.TargetStatus

// Intent is the operator intent in force and the store revision it was
// saved or loaded as (0: nothing was ever saved).
type Intent struct {
	State    intent.State
	Revision uint64
}

// GSLBPlan is what the GSLB answers in force were built from.
type GSLBPlan struct {
	// Config is the configuration of the snapshot.
	Config *configs.Config
	// Pools are the pools' states, in configuration order.
	Pools []gslb.PoolState
	// Serial is the zones' SOA serial.
	Serial uint32
	// Built is when the snapshot was built.
	Built time.Time
}

// Verdict says whether one thing that can attract traffic (a VIP, a
// responder listen address) serves, and why (vip.Verdict).
type Verdict = vip.Verdict

// ResponderState is the GSLB responder as the rest of the daemon sees
// it.
type ResponderState struct {
	// On is whether the responder is configured to listen.
	On bool
	// Listeners are the verdicts of every configured listen address.
	Listeners []Verdict
	// Fronts are the verdicts of every configured listen address of the
	// encrypted fronts ([gslb.tls] doh_listen, then dot_listen), each
	// named by its front and address as configured: "doh
	// 192.0.2.10:443", "dot 192.0.2.10:853".
	Fronts []Verdict
	// Serial is the SOA serial in force (0 before the first build).
	Serial uint32
	// BuildError is why the last build failed ("" when it worked).
	BuildError string
	// LastResort lists the names and types answering by their last
	// resort, with the last resort taken.
	LastResort []gslb.NameStatus
}
