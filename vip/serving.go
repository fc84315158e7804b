package vip

import (
	"fmt"
	"net/netip"
	"strings"

	"lbdns/configs"
)

// Verdict says whether one thing that can attract traffic (a VIP, a
// responder listen address) serves, and why.
type Verdict struct {
	// Name is the VIP's name, or the listen address as configured.
	Name string
	// Addr is the VIP's address, or the address listened on.
	Addr netip.Addr
	// Serving is the verdict.
	Serving bool
	// Degraded is set on a VIP that serves while its pool is below its
	// min_healthy or failing open: a route announcer announces it with a
	// worse preference rather than withdraw it (withdrawing a pool that
	// fails open could turn a partial outage into a total one).
	Degraded bool
	// Partial is set on a VIP that does not serve while some of its
	// services still have a destination taking traffic (UDP answering,
	// TCP with none, say): not truly dead, so a fleet-wide announcement
	// floor may keep it announced with a worse preference. A VIP with no
	// destination taking traffic at all, and a listener, never are.
	Partial bool
	// Reason says why, in one line an operator reads.
	Reason string
}

// PoolHealth is what a VIP's verdict needs of its pool's plan.
type PoolHealth struct {
	// FailOpen: the pool keeps its members in traffic though too few
	// are healthy.
	FailOpen bool
	// Below: fewer members are healthy than its min_healthy.
	Below bool
}

// ServiceKeys are the IPVS services of VIP v: each protocol and port.
func ServiceKeys(v *configs.VIP) []ServiceKey {
	var out []ServiceKey
	for _, proto := range v.Protocols {
		pr := UDP
		if proto == "tcp" {
			pr = TCP
		}
		for _, port := range v.Ports {
			out = append(out, ServiceKey{Addr: v.Addr, Port: uint16(port), Proto: pr})
		}
	}
	return out
}

// Verdicts says whether each VIP of cfg serves, from the IPVS table the
// kernel was given (applied; in a dry run none was, so none serves) and
// its pool's health in the plan (pools, by pool name). A VIP serves when every one of its
// services (each protocol and port) has at least one destination taking
// traffic (weight above 0): members held in traffic by a pool failing
// open count, a service with no such destination does not serve, and a
// VIP that answers UDP but resets TCP would break truncated answers, so
// one service short is enough to say no (the VIP is then Partial when
// another of its services still has a destination taking traffic). A
// VIP that serves while its pool fails open or is below its min_healthy
// is Degraded.
func Verdicts(cfg *configs.Config, applied Table, pools map[string]PoolHealth, dryRun bool) []Verdict {
	out := make([]Verdict, 0, len(cfg.VIPs))
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		verdict := Verdict{Name: v.Name, Addr: v.Addr}
		if dryRun {
			verdict.Reason = "dry run: the IPVS table is computed, not applied"
			out = append(out, verdict)
			continue
		}
		var parts, short []string
		for _, k := range ServiceKeys(v) {
			taking, total := 0, 0
			if svc, ok := applied[k]; ok {
				for _, d := range svc.Dests {
					total++
					if d.Weight > 0 {
						taking++
					}
				}
			}
			what := fmt.Sprintf("%s/%d", k.Proto, k.Port)
			parts = append(parts, fmt.Sprintf("%s %d of %d destinations taking traffic", what, taking, total))
			if taking == 0 {
				short = append(short, what)
			}
		}
		verdict.Serving = len(short) == 0 && len(parts) > 0
		verdict.Partial = !verdict.Serving && len(short) < len(parts)
		switch {
		case verdict.Serving:
			verdict.Reason = "serving: " + strings.Join(parts, ", ")
			switch {
			case pools[v.Pool].FailOpen:
				verdict.Degraded = true
				verdict.Reason += " (degraded: pool " + v.Pool + " failing open)"
			case pools[v.Pool].Below:
				verdict.Degraded = true
				verdict.Reason += " (degraded: pool " + v.Pool + " below its min_healthy)"
			}
		default:
			verdict.Reason = "not serving: no destination taking traffic on " + strings.Join(short, ", ") + " (pool " + v.Pool + ")"
		}
		out = append(out, verdict)
	}
	return out
}
