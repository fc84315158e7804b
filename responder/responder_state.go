package responder

import (
	"fmt"
	"net/netip"
	"slices"

	"lbdns/hub"
)

// publishLocked publishes the responder's state, and the pools' states
// of the snapshot in force, to the hub (nothing without one). Called
// under r.mu after every change of either.
func (r *Responder) publishLocked() {
	h := r.o.Hub
	if h == nil {
		return
	}
	st := r.stateLocked()
	if old, _ := h.Responder.Load(); !sameState(old, st) {
		h.Responder.Publish(st)
	}
	if old, _ := h.GSLB.Load(); old.Config != r.cfg || old.Serial != r.serial || !samePools(old.Pools, r.pools) {
		h.GSLB.Publish(hub.GSLBPlan{Config: r.cfg, Pools: r.pools, Serial: r.serial, Built: r.built})
	}
}

// stateLocked returns the responder's state as the hub holds it: a
// listen address serves when its socket is bound and an answer snapshot
// is in force.
func (r *Responder) stateLocked() hub.ResponderState {
	st := hub.ResponderState{Serial: r.serial, BuildError: r.buildErr}
	if r.cfg == nil {
		return st
	}
	want := r.cfg.GSLB.Server
	st.On = len(want.ListenAddrs) > 0
	var bound []string
	if r.srv != nil {
		for _, a := range r.srv.Addrs() {
			bound = append(bound, a.String())
		}
	}
	for i, ap := range want.ListenAddrs {
		v := hub.Verdict{Name: want.Listen[min(i, len(want.Listen)-1)], Addr: ap.Addr()}
		switch {
		case r.srv == nil && r.listenErr != "":
			v.Reason = "not listening: " + r.listenErr
		case r.srv == nil:
			v.Reason = "not listening"
		case r.snap == nil:
			v.Reason = "listening, but no answer snapshot was built yet"
		case i >= len(bound):
			v.Reason = "not bound"
		default:
			v.Serving = true
			v.Reason = fmt.Sprintf("answering on %s from the snapshot of serial %d", bound[i], r.serial)
			if r.buildErr != "" {
				v.Reason += " (the last build failed: " + r.buildErr + "; these answers stay until one succeeds)"
			}
		}
		st.Listeners = append(st.Listeners, v)
	}
	st.Fronts = r.frontVerdictsLocked()
	st.LastResort = r.lastResorts
	return st
}

// sameState reports whether a and b say the same.
func sameState(a, b hub.ResponderState) bool {
	return a.On == b.On && a.Serial == b.Serial && a.BuildError == b.BuildError &&
		slices.Equal(a.Listeners, b.Listeners) && slices.Equal(a.Fronts, b.Fronts) && slices.Equal(a.LastResort, b.LastResort)
}

// frontVerdictsLocked returns the verdicts of the encrypted fronts'
// listen addresses of r.cfg ([gslb.tls] doh_listen, then dot_listen),
// named "doh ADDR" and "dot ADDR": one serves when its front's socket
// is bound (its certificate loaded) and an answer snapshot is in force.
// A front that could not be bound, or whose certificate cannot be
// loaded, leaves the responder off: its addresses do not serve, with
// that reason. Called under r.mu.
func (r *Responder) frontVerdictsLocked() []hub.Verdict {
	t := r.cfg.GSLB.TLS
	var dohBound, dotBound []netip.AddrPort
	if r.srv != nil {
		dohBound, dotBound = r.srv.FrontAddrs()
	}
	var out []hub.Verdict
	for _, f := range []struct {
		front string
		names []string
		addrs []netip.AddrPort
		bound []netip.AddrPort
	}{{"doh", t.DoHListen, t.DoHAddrs, dohBound}, {"dot", t.DoTListen, t.DoTAddrs, dotBound}} {
		for i, ap := range f.addrs {
			name := ap.String()
			if i < len(f.names) {
				name = f.names[i]
			}
			v := hub.Verdict{Name: f.front + " " + name, Addr: ap.Addr()}
			switch {
			case r.srv == nil && r.listenErr != "":
				v.Reason = "not listening: " + r.listenErr
			case r.srv == nil:
				v.Reason = "not listening"
			case i >= len(f.bound):
				v.Reason = "not bound (the " + f.front + " front is not serving)"
			case r.snap == nil:
				v.Reason = "listening, but no answer snapshot was built yet"
			default:
				v.Serving = true
				v.Reason = fmt.Sprintf("answering %s on %s from the snapshot of serial %d", f.front, f.bound[i], r.serial)
			}
			out = append(out, v)
		}
	}
	return out
}
