package report

import (
	"net/netip"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/monitor"
)

// GSLBPools is the status view of cfg's GSLB pools (gslb.EvaluateForced
// over the monitor's statuses and the forced member states at now), in
// configuration order; nil when none is configured.
func GSLBPools(cfg *configs.Config, statuses map[monitor.Key]monitor.TargetStatus, forced gslb.ForcedStates, now time.Time) []control.GSLBPool {
	if cfg == nil || len(cfg.GSLB.Pools) == 0 {
		return nil
	}
	pools := gslb.EvaluateForced(cfg, statuses, forced, now)
	out := make([]control.GSLBPool, 0, len(pools))
	for _, p := range pools {
		cp := control.GSLBPool{Name: p.Name, Combine: p.Combine, AtLeast: p.AtLeast, Up: p.Up, Total: p.Total,
			Members: make([]control.GSLBMember, 0, len(p.Members))}
		if cfgPool := cfg.GSLBPool(p.Name); cfgPool != nil {
			cp.Fallback = cfgPool.Fallback
		}
		for _, m := range p.Members {
			cm := control.GSLBMember{Name: m.Name, Address: addrText(m.Addr), ProbeAddress: addrText(m.ProbeAddr),
				Weight: m.Weight, Priority: m.Priority, State: m.State.String(), Since: utc(m.Since), Reason: m.Reason,
				Monitors: make([]control.GSLBMonitor, 0, len(m.Monitors))}
			for _, mon := range m.Monitors {
				cm.Monitors = append(cm.Monitors, monitorView(mon))
			}
			cp.Members = append(cp.Members, cm)
		}
		out = append(out, cp)
	}
	return out
}

// monitorView is the status view of one monitor of a member, with the
// facts of its kind that its last probe found, whatever they are.
func monitorView(mon gslb.MonitorState) control.GSLBMonitor {
	out := control.GSLBMonitor{Check: mon.Check, Kind: mon.Kind,
		State: mon.State.String(), Since: utc(mon.Since), LastProbe: utc(mon.LastAt),
		LastResult: mon.Last.Detail, LastOK: !mon.LastAt.IsZero() && mon.Last.OK, RTTMillis: float64(mon.Last.RTT.Microseconds()) / 1000}
	for _, f := range mon.Last.Facts {
		out.Facts = append(out.Facts, control.Fact{Name: f.Name, Value: f.Value, Text: f.Text})
	}
	return out
}

// addrText is a's text, "" when a is not set.
func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// utc is t in UTC, the zero time kept as it is.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
