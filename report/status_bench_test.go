package report

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/health"
	"lbdns/monitor"
	"lbdns/resolvers"
	"lbdns/vip"
)

// BenchmarkStatus measures building one status snapshot and one metrics
// gather from the input of 1,000 pools of 5 back ends (5,000 targets), all
// up and in traffic with statistics: the view alone, without a daemon
// (daemon's BenchmarkStatus measures the whole path).
func BenchmarkStatus(b *testing.B) {
	const pools, size = 1000, 5
	var s strings.Builder
	s.WriteString("[check.rec]\n\n[check.rec.dns]\nzone = \"lbdns.test\"\n\n")
	vendors := []string{"bind", "unbound", "powerdns", "knot", "dnsmasq"}
	for p := range pools {
		fmt.Fprintf(&s, "[[vip]]\nname = \"v%d\"\naddress = \"10.%d.%d.1\"\nforwarding = \"nat\"\npool = \"p%d\"\n\n", p, p/250, p%250, p)
		var members []string
		for j := range size {
			members = append(members, fmt.Sprintf("%q", fmt.Sprintf("r%d-%d", p, j)))
		}
		fmt.Fprintf(&s, "[[pool]]\nname = \"p%d\"\nmembers = [%s]\ncheck = \"rec\"\n\n", p, strings.Join(members, ", "))
		for j := range size {
			fmt.Fprintf(&s, "[[resolver]]\nname = \"r%d-%d\"\naddress = \"127.%d.%d.%d:53\"\nvendor = %q\n\n", p, j, 1+p/250, p%250, 1+j, vendors[j])
		}
	}
	cfg, err := configs.Parse([]byte(s.String()), "bench.toml")
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Now: t0, Config: cfg, Applied: vip.Table{}, Stats: Stats{}}
	targets := map[string]monitor.TargetStatus{}
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		ps := resolvers.PoolStatus{Name: p.Name, MinHealthy: 1, Total: size, Enabled: size, Healthy: size, Vendors: map[string]resolvers.VendorCount{}}
		for _, name := range p.Members {
			r := cfg.Resolver(name)
			ps.Members = append(ps.Members, resolvers.Member{Name: name, Vendor: r.Vendor, Addr: r.AddrPort, State: health.Up, Fresh: true, Since: t0})
			ps.Vendors[r.Vendor] = resolvers.VendorCount{Total: 1, Healthy: 1}
			targets[resolvers.TargetKey{Resolver: name, Check: p.Check}.String()] = monitor.TargetStatus{LastAt: t0}
		}
		in.Plan.Pools = append(in.Plan.Pools, ps)
		for _, k := range vip.ServiceKeys(&cfg.VIPs[i]) { // VIP i fronts pool i
			svc := vip.Service{Key: k, Scheduler: "wrr", Dests: map[netip.AddrPort]vip.Destination{}}
			in.Stats[k] = map[netip.AddrPort]vip.DestStats{}
			for _, m := range ps.Members {
				svc.Dests[m.Addr] = vip.Destination{Addr: m.Addr, Forwarding: vip.NAT, Weight: 1}
				in.Stats[k][m.Addr] = vip.DestStats{Conns: 1}
			}
			in.Applied[k] = svc
		}
	}
	in.Target = func(r, c string) (monitor.TargetStatus, bool) {
		ts, ok := targets[resolvers.TargetKey{Resolver: r, Check: c}.String()]
		return ts, ok
	}
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			Status(in)
		}
	})
	b.Run("metrics", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		if _, err := NewMetrics(reg, func(context.Context) Input { return in }); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
