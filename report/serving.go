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
// one service short is enough to say no. Before the warm-up is over the
// applied table is the one adopted from the kernel.
func VIPVerdicts(cfg *configs.Config, applied vip.Table, plan resolvers.Plan, dryRun bool) []hub.Verdict {
	out := make([]hub.Verdict, 0, len(cfg.VIPs))
	failOpen := map[string]bool{}
	for _, p := range plan.Pools {
		failOpen[p.Name] = p.FailOpen
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
		switch {
		case verdict.Serving:
			verdict.Reason = "serving: " + strings.Join(parts, ", ")
			if failOpen[v.Pool] {
				verdict.Reason += " (pool " + v.Pool + " failing open)"
			}
		default:
			verdict.Reason = "not serving: no destination taking traffic on " + strings.Join(short, ", ") + " (pool " + v.Pool + ")"
		}
		out = append(out, verdict)
	}
	return out
}
