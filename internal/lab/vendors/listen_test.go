package vendors

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/internal/lab/dnstest"
	"lbdns/testkit/netns"
)

// TestSpecListenAllow checks the lines Options.Listen and Options.Allow
// put in each product's configuration, next to the 127.0.0.1 listener
// and the 127.0.0.0/8 default, and what the zero Options give.
func TestSpecListenAllow(t *testing.T) {
	listen := netip.MustParseAddrPort("127.0.0.1:5300")
	upstream := netip.MustParseAddrPort("127.0.0.1:5400")
	opts := Options{
		Listen: []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.5")},
		Allow:  []netip.Prefix{netip.MustParsePrefix("198.18.0.0/30"), netip.MustParsePrefix("198.18.0.6/30")},
	}
	tests := []struct {
		vendor     Vendor
		file       string
		want, zero []string // lines in the config with opts, with Options{}
	}{
		{Unbound, "unbound.conf", []string{
			"\tinterface: 127.0.0.1@5300\n\tinterface: 198.18.0.1@5300\n\tinterface: 198.18.0.5@5300\n",
			"\taccess-control: 127.0.0.0/8 allow\n\taccess-control: 198.18.0.0/30 allow\n\taccess-control: 198.18.0.4/30 allow\n",
		}, []string{"\tinterface: 127.0.0.1@5300\n\tport: 5300\n", "\taccess-control: 127.0.0.0/8 allow\n\tdo-not-query-localhost"}},
		{BIND, "named.conf", []string{
			"\tlisten-on port 5300 { 127.0.0.1; 198.18.0.1; 198.18.0.5; };\n",
			"\tallow-query { 127.0.0.0/8; 198.18.0.0/30; 198.18.0.4/30; };\n",
			"\tallow-recursion { 127.0.0.0/8; 198.18.0.0/30; 198.18.0.4/30; };\n",
		}, []string{"\tlisten-on port 5300 { 127.0.0.1; };\n", "\tallow-query { 127.0.0.0/8; };\n", "\tallow-recursion { 127.0.0.0/8; };\n"}},
		{Knot, "kresd.conf", []string{
			"\nnet.listen('127.0.0.1', 5300, { kind = 'dns' })\nnet.listen('198.18.0.1', 5300, { kind = 'dns' })\nnet.listen('198.18.0.5', 5300, { kind = 'dns' })\n",
		}, []string{"\nnet.listen('127.0.0.1', 5300, { kind = 'dns' })\ncache.size"}},
		{PowerDNS, "recursor.conf", []string{
			"\nlocal-address=127.0.0.1,198.18.0.1,198.18.0.5\n",
			"\nallow-from=127.0.0.0/8,198.18.0.0/30,198.18.0.4/30\n",
		}, []string{"\nlocal-address=127.0.0.1\n", "\nallow-from=127.0.0.0/8\n"}},
		{Dnsmasq, "dnsmasq.conf", []string{
			"\nlisten-address=127.0.0.1,198.18.0.1,198.18.0.5\n",
		}, []string{"\nlisten-address=127.0.0.1\n"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.vendor), func(t *testing.T) {
			for _, c := range []struct {
				opts Options
				want []string
			}{{opts, tc.want}, {Options{}, tc.zero}} {
				sp, err := specFor(tc.vendor, "/tmp/x", listen, upstream, c.opts)
				if err != nil {
					t.Fatal(err)
				}
				conf := sp.files[tc.file]
				for _, w := range c.want {
					if !strings.Contains(conf, w) {
						t.Errorf("options %+v: %s lacks %q:\n%s", c.opts, tc.file, w, conf)
					}
				}
				if len(c.opts.Listen) == 0 && strings.Contains(conf, "198.18.") {
					t.Errorf("zero options: %s has an address of opts:\n%s", tc.file, conf)
				}
			}
		})
	}
	for _, bad := range []struct {
		opts Options
		want string
	}{
		{Options{Listen: []netip.Addr{netip.MustParseAddr("fd00:18::1")}}, `listen address "fd00:18::1": want an IPv4 address`},
		{Options{Allow: []netip.Prefix{netip.MustParsePrefix("fd00:18::/64")}}, `allowed network "fd00:18::/64": want an IPv4 prefix`},
		{Options{Allow: []netip.Prefix{{}}}, `allowed network "invalid Prefix": want an IPv4 prefix`},
	} {
		if _, err := specFor(Unbound, "/tmp/x", listen, upstream, bad.opts); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: error %v, want one with %q", bad.opts, err, bad.want)
		}
	}
}

// TestClientInNamespace starts every product listening also on the root
// end of a network namespace's veth pair and queries it from inside the
// namespace: answered when Options.Allow has the namespace's network;
// unbound and BIND refuse, and PowerDNS Recursor drops, the same client
// when it does not (Knot Resolver and dnsmasq have no client ACL here).
func TestClientInNamespace(t *testing.T) {
	h := netns.New(t, "vendors-client")
	up := dnstest.NewServer(t)
	network := netip.PrefixFrom(h.AddrV4(), 30).Masked()
	for _, v := range All() {
		t.Run(string(v), func(t *testing.T) {
			p := StartWith(t, v, up.Addr(), Options{Listen: []netip.Addr{h.RootAddrV4()}, Allow: []netip.Prefix{network}})
			to := netip.AddrPortFrom(h.RootAddrV4(), p.Addr.Port())
			r, err := queryFrom(h, to, up.Name("www"), time.Second)
			if err != nil {
				t.Fatalf("from %s to %s: %v\n%s", h.AddrV4(), to, err, p.Log())
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != dnstest.DefaultA {
				t.Fatalf("from %s to %s: %s %v, want NOERROR %s", h.AddrV4(), to, dns.RcodeToString[r.Rcode], r.Answer, dnstest.DefaultA)
			}
			if v != Unbound && v != BIND && v != PowerDNS {
				return
			}
			p.Kill()
			p = StartWith(t, v, up.Addr(), Options{Listen: []netip.Addr{h.RootAddrV4()}})
			to = netip.AddrPortFrom(h.RootAddrV4(), p.Addr.Port())
			r, err = queryFrom(h, to, up.Name("www"), time.Second)
			switch {
			case v == PowerDNS && isTimeout(err):
			case v != PowerDNS && err == nil && r.Rcode == dns.RcodeRefused:
			default:
				t.Errorf("not allowed: from %s to %s: %s, want REFUSED (PowerDNS Recursor: no answer)", h.AddrV4(), to, describe(r, err))
			}
		})
	}
}

// queryFrom sends one A query for name to to from inside h and waits up
// to timeout for the answer.
func queryFrom(h *netns.Host, to netip.AddrPort, name string, timeout time.Duration) (*dns.Msg, error) {
	var r *dns.Msg
	c := &dns.Client{Net: "udp", Timeout: timeout}
	q := new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA)
	// The client's socket is made on Run's thread, inside h.
	err := h.Run(func() (err error) {
		r, _, err = c.Exchange(q, to.String())
		return err
	})
	return r, err
}
