package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"lbdns/internal/lab/vendors"
	"lbdns/testkit/poll"
)

// TestGSLBLastResortScope: with region west's pool down and region
// east's up, a west client gets the name's last resort (fail-open: every
// member) with the ECS scope of its location (/25), not 0; so Debian's
// unbound with its subnet cache, having cached west's fail-open answer,
// still asks lbdnsd for an east client and gives it east's member alone.
func TestGSLBLastResortScope(t *testing.T) {
	t.Parallel()
	w := newWorld(t, layout{})
	probes := map[string]net.Listener{}
	for _, region := range []string{"east", "west"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { acceptLoop(l); close(done) }()
		t.Cleanup(func() { l.Close(); <-done })
		probes[region] = l
	}
	port, err := vendors.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port).String()
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nstate_dir = %q\ncontrol_socket = %q\nstatus_listen = \"127.0.0.1:0\"\n", w.stateDir, w.socket)
	for region, l := range probes {
		fmt.Fprintf(&b, "\n[check.%s]\nkind = \"tcp\"\ninterval = \"200ms\"\ntimeout = \"100ms\"\nrise = 1\nfall = 2\n\n[check.%s.tcp]\nport = %d\n",
			region, region, l.Addr().(*net.TCPAddr).Port)
	}
	fmt.Fprintf(&b, "\n[gslb]\npolicy_order = [\"region\", \"global\"]\n\n[gslb.server]\nlisten = [%q]\n", srv)
	fmt.Fprintf(&b, "\n[[gslb.zone]]\nname = %q\nns = [\"ns1.%s.\"]\n", respZone, respZone)
	fmt.Fprintf(&b, "\n[[gslb.name]]\nname = %q\necs = true\nttl = 300\n", strings.TrimSuffix(respWWW, "."))
	for _, region := range []string{"east", "west"} {
		fmt.Fprintf(&b, "\n[[gslb.name.policy]]\nmatch = { region = %q }\npool = %q\n", region, region)
	}
	for _, m := range []struct{ pool, member, addr string }{{"east", "e1", "192.0.2.1"}, {"west", "w1", "192.0.2.2"}, {"west", "w2", "192.0.2.3"}} {
		if m.member != "w2" {
			fmt.Fprintf(&b, "\n[[gslb.pool]]\nname = %q\nmonitors = [%q]\n", m.pool, m.pool)
		}
		fmt.Fprintf(&b, "\n[[gslb.pool.member]]\nname = %q\naddress = %q\nprobe_address = \"127.0.0.1\"\n", m.member, m.addr)
	}
	fmt.Fprintf(&b, "\n[[gslb.topology.net]]\nprefix = \"127.0.0.0/25\"\nlabels = { region = \"east\" }\n")
	fmt.Fprintf(&b, "\n[[gslb.topology.net]]\nprefix = \"127.0.0.128/25\"\nlabels = { region = \"west\" }\n")
	if err := os.WriteFile(w.cfgPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	w.spawn().waitReady()

	west := netip.MustParsePrefix("127.0.0.200/32")
	poll.Until(t, startTimeout, "west answered by its pool", func() (bool, string) {
		r, err := ask(srv, respWWW, dns.TypeA, west)
		if err != nil {
			return false, err.Error()
		}
		return len(r.Answer) == 1 && r.Rcode == dns.RcodeSuccess, r.String()
	})
	probes["west"].Close() // west's members down
	var scope uint8
	poll.Until(t, startTimeout, "west answered by the last resort", func() (bool, string) {
		r, err := ask(srv, respWWW, dns.TypeA, west)
		if err != nil {
			return false, err.Error()
		}
		for _, o := range r.IsEdns0().Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				scope = e.SourceScope
			}
		}
		return len(r.Answer) == 3, r.String()
	})
	if scope != 25 {
		t.Errorf("west's last resort: ECS scope %d, want 25 (its location's: east still gets its pool)", scope)
	}

	ub := startUnbound(t, "\tmodule-config: \"subnetcache iterator\"\n\tsend-client-subnet: 127.0.0.1\n\tmax-client-subnet-ipv4: 32\n\tclient-subnet-always-forward: yes\n",
		fmt.Sprintf("stub-zone:\n\tname: %q\n\tstub-addr: %s\n", respZone, strings.Replace(srv, ":", "@", 1)))
	p := fmt.Sprint(ub.Port())
	if got := lines(digTool(t, "dig", "@127.0.0.1", "-p", p, "-b", "127.0.0.130", "+short", respWWW, "A")); len(got) != 3 {
		t.Errorf("west through unbound: %q, want the fail-open set (3 members)", got)
	}
	for _, from := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		got := lines(digTool(t, "dig", "@127.0.0.1", "-p", p, "-b", from, "+short", respWWW, "A"))
		if !slices.Equal(got, []string{"192.0.2.1"}) {
			t.Errorf("east (%s) through unbound after west: %q, want east's member 192.0.2.1 alone (not west's last resort from the cache)", from, got)
		}
	}
}
