package report

import (
	"fmt"
	"strings"

	"lbdns/configs"
	"lbdns/hub"
	"lbdns/resolvers"
	"lbdns/vip"
)

// VIPVerdicts says whether each VIP of cfg serves, from the IPVS table
// the kernel was given (applied; in a dry run none was, so none serves)
// and the plan's pool verdicts. A VIP serves when every one of its
// services (each protocol and port) has at least one destination taking
// traffic (weight above 0): members held in traffic by a pool failing
// open count, a service with no such destination does not serve, and a
// VIP that answers UDP but resets TCP would break truncated answers, so
// one service short is enough to say no (the VIP is then Partial when
// another of its services still has a destination taking traffic). A
// VIP that serves while its pool fails open or is below its min_healthy
// is Degraded.
func VIPVerdicts(cfg *configs.Config, applied vip.Table, plan resolvers.Plan, dryRun bool) []hub.Verdict {
	out := make([]hub.Verdict, 0, len(cfg.VIPs))
	failOpen, below := map[string]bool{}, map[string]bool{}
	for _, p := range plan.Pools {
		failOpen[p.Name], below[p.Name] = p.FailOpen, p.Healthy < p.MinHealthy
	}
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		verdict := hub.Verdict{Name: v.Name, Addr: v.Addr}
		if dryRun {
			verdict.Reason = "dry run: the IPVS table is computed, not applied"
			out = append(out, verdict)
			continue
		}
		var parts, short []string
		for _, k := range vipKeys(v) {
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
			case failOpen[v.Pool]:
				verdict.Degraded = true
				verdict.Reason += " (degraded: pool " + v.Pool + " failing open)"
			case below[v.Pool]:
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
