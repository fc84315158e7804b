package resolvers

import (
	"net/netip"
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

// NewTakers lists, sorted and once each, the resolvers that have a
// destination with a weight above zero in after but not in before: the
// ones a change would newly send queries to. Each is named from cfg with
// its address, "NAME (ADDR:PORT)"; a destination no resolver of cfg has
// is listed by its address alone.
func NewTakers(cfg *configs.Config, before, after vip.Table) []string {
	var out []string
	for _, k := range after.Keys() {
		for a, dst := range after[k].Dests {
			if dst.Weight == 0 {
				continue
			}
			if old, ok := before[k].Dests[a]; !ok || old.Weight == 0 {
				if s := resolverAt(cfg, a); !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// resolverAt names the resolver of cfg at destination a, as
// "NAME (ADDR:PORT)"; a alone when none has that address and port.
func resolverAt(cfg *configs.Config, a netip.AddrPort) string {
	for i := range cfg.Resolvers {
		if r := &cfg.Resolvers[i]; r.AddrPort == a {
			return r.Name + " (" + a.String() + ")"
		}
	}
	return a.String()
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
