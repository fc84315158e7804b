package prefetch

import (
	"lbdns/configs"

	"github.com/miekg/dns"
)

// Specs lists the entries cfg asks to keep warm: for every
// [[prefetch.domain]], each of its types, each member of its pools (every
// pool when it names none; a resolver in several pools counts once), and
// each of its ECS partitions (or none), in config order.
//
// The ECS entries of an unbound resolver in window mode are run in expiry
// mode (see SubnetExpiry).
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
						if subnetNoWindow(r.Vendor, pol) {
							sp.Policy = Policy{Mode: Expiry}
						}
					}
					out = append(out, sp)
				}
			}
		}
	}
	return out
}

// subnetNoWindow reports whether a resolver of vendor, refreshing by pol,
// refreshes no ECS entry in a window: unbound's subnet cache (the
// subnetcache module) ignores "prefetch: yes" and keeps an answer for a
// client subnet until it expires, so a query inside the window refreshes
// nothing and clients meet every expiry. Queried just after expiry, the
// entry is re-fetched by the prefetcher instead; where unbound runs
// without the subnet cache (and ignores the ECS option), that costs the
// small gap of any expiry product.
func subnetNoWindow(vendor string, pol Policy) bool {
	return vendor == "unbound" && pol.Mode == Window
}

// SubnetExpiry returns the names of the resolvers whose ECS entries
// Specs runs in expiry mode although their refresh mode is window
// (unbound: see Specs), in config order; nil when there are none.
func SubnetExpiry(cfg *configs.Config) []string {
	var out []string
	seen := map[string]bool{}
	for _, sp := range Specs(cfg) {
		r := cfg.Resolver(sp.Key.Resolver)
		if sp.Key.Partition == "" || r == nil || seen[r.Name] {
			continue
		}
		if subnetNoWindow(r.Vendor, PolicyFor(r.Vendor, r.Refresh, r.RefreshWindow.Duration, r.RefreshWindowPercent)) {
			seen[r.Name] = true
			out = append(out, r.Name)
		}
	}
	return out
}
