package prefetch

import (
	"lbdns/configs"

	"github.com/miekg/dns"
)

// Specs lists the entries cfg asks to keep warm: for every
// [[prefetch.domain]], each of its types, each member of its pools (every
// pool when it names none; a resolver in several pools counts once), and
// each of its ECS partitions (or none), in config order.
func Specs(cfg *configs.Config) []Spec {
	var out []Spec
	parts := map[string]configs.PrefetchPartition{}
	for _, p := range cfg.Prefetch.Partitions {
		parts[p.Name] = p
	}
	for _, d := range cfg.Prefetch.Domains {
		pools := d.Pools
		if len(pools) == 0 {
			for _, p := range cfg.Pools {
				pools = append(pools, p.Name)
			}
		}
		var res []*configs.Resolver
		seen := map[string]bool{}
		for _, pn := range pools {
			p := cfg.Pool(pn)
			if p == nil {
				continue
			}
			for _, r := range cfg.Members(p) {
				if !seen[r.Name] {
					seen[r.Name] = true
					res = append(res, r)
				}
			}
		}
		partitions := d.ECS
		if len(partitions) == 0 {
			partitions = []string{""}
		}
		for _, ty := range d.Types {
			qt := dns.StringToType[ty]
			for _, r := range res {
				pol := PolicyFor(r.Vendor, r.Refresh, r.RefreshWindow.Duration, r.RefreshWindowPercent)
				for _, pn := range partitions {
					sp := Spec{Key: Key{Name: dns.Fqdn(d.Name), Type: qt, Resolver: r.Name, Partition: pn}, Addr: r.AddrPort, Policy: pol}
					if pn != "" {
						sp.ECS = parts[pn].Addr
					}
					out = append(out, sp)
				}
			}
		}
	}
	return out
}
