package resolvers

import (
	"slices"

	"lbdns/configs"
	"lbdns/vip"
)

// LostTakers lists the services (as "VIP proto/addr:port", the VIP's name
// from cfg) that have a destination with a weight above zero in before
// and none in after: the services a change would leave with nobody taking
// new queries.
func LostTakers(cfg *configs.Config, before, after vip.Table) []string {
	var out []string
	for _, k := range before.Keys() {
		if takers(before[k]) > 0 && takers(after[k]) == 0 {
			out = append(out, vipName(cfg, k)+" "+k.String())
		}
	}
	return out
}

// NewTakers lists, sorted, the destinations (as "ADDR:PORT in SERVICE")
// that have a weight above zero in after but not in before: the ones a
// change would newly send queries to.
func NewTakers(before, after vip.Table) []string {
	var out []string
	for _, k := range after.Keys() {
		for a, dst := range after[k].Dests {
			if dst.Weight == 0 {
				continue
			}
			if old, ok := before[k].Dests[a]; !ok || old.Weight == 0 {
				out = append(out, a.String()+" in "+k.String())
			}
		}
	}
	slices.Sort(out)
	return out
}

// takers counts the destinations of s with a weight above zero.
func takers(s vip.Service) int {
	n := 0
	for _, d := range s.Dests {
		if d.Weight > 0 {
			n++
		}
	}
	return n
}

// vipName names the configured VIP at k's address ("?" when none).
func vipName(cfg *configs.Config, k vip.ServiceKey) string {
	for i := range cfg.VIPs {
		if cfg.VIPs[i].Addr == k.Addr {
			return cfg.VIPs[i].Name
		}
	}
	return "?"
}
