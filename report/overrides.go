package report

import (
	"lbdns/configs"
	"lbdns/control"
	"lbdns/intent"
)

// Overrides turns the stored operator overrides into the API's, in the
// same order, marking those cfg no longer matches as orphaned
// (intent.Orphaned).
func Overrides(cfg *configs.Config, list []intent.Override) []control.Override {
	out := make([]control.Override, 0, len(list))
	for _, o := range list {
		out = append(out, control.Override{Resolver: o.Resolver, Pool: o.Pool, VIP: o.VIP, Action: o.Action,
			Reason: o.Reason, Set: o.Set, By: o.By, Orphaned: intent.Orphaned(cfg, o) != ""})
	}
	return out
}
