package intake

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/dnstap"
	"lbdns/internal/dnstest"
	"lbdns/internal/vendors"
)

// TestVendorsSendDnstap runs Debian's unbound, BIND and Knot Resolver
// with dnstap pointed at a Server (a Unix socket; unbound also over
// TCP), sends each queries from several loopback source addresses, and
// checks that every query and its response arrive decoded with the
// address, name, type and rcode that were sent, and the identity the
// product was given.
func TestVendorsSendDnstap(t *testing.T) {
	cases := []struct {
		vendor vendors.Vendor
		tcp    bool
	}{
		{vendors.Unbound, false},
		{vendors.Unbound, true},
		{vendors.BIND, false},
		{vendors.Knot, false},
	}
	for _, tc := range cases {
		name := string(tc.vendor) + "/unix"
		if tc.tcp {
			name = string(tc.vendor) + "/tcp"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			up := dnstest.NewServer(t)
			f := start(t, Config{})
			identity := "lbdns-test-" + string(tc.vendor)
			d := &vendors.Dnstap{Unix: f.unix, Identity: identity}
			if tc.tcp {
				d = &vendors.Dnstap{TCP: netip.MustParseAddrPort(f.tcp), Identity: identity}
			}
			p := vendors.StartWith(t, tc.vendor, up.Addr(), vendors.Options{Dnstap: d})

			// Clients on 127.0.0.2..4 ask names of their own: one that
			// exists (NOERROR) and one that does not (NXDOMAIN).
			type sent struct {
				client netip.Addr
				name   string
				rcode  int
			}
			var want []sent
			for i := 2; i <= 4; i++ {
				client := netip.AddrFrom4([4]byte{127, 0, 0, byte(i)})
				www := up.Name("www")
				missing := up.Name(fmt.Sprintf("c%d-missing", i))
				for _, q := range []struct {
					name  string
					rcode int
				}{{www, dns.RcodeSuccess}, {missing, dns.RcodeNameError}} {
					r := queryFrom(t, client, p.Addr, q.name)
					if r.Rcode != q.rcode {
						t.Fatalf("%s from %v: %s, want %s\n%s", q.name, client, dns.RcodeToString[r.Rcode], dns.RcodeToString[q.rcode], p.Log())
					}
					want = append(want, sent{client, strings.ToLower(q.name), q.rcode})
				}
			}

			// Wait for a query and a response of every one sent (the
			// products send them asynchronously, and also log the
			// readiness probe's version.bind).
			deadline := time.Now().Add(20 * time.Second)
			for {
				got := map[string]int{}
				for _, m := range f.sink.snapshot() {
					got[fmt.Sprintf("%v %s %s", m.Type, m.Client, m.Name)]++
				}
				missing := 0
				for _, w := range want {
					for _, typ := range []dnstap.Type{dnstap.ClientQuery, dnstap.ClientResponse} {
						if got[fmt.Sprintf("%v %s %s", typ, w.client, w.name)] == 0 {
							missing++
						}
					}
				}
				if missing == 0 {
					break
				}
				if time.Now().After(deadline) {
					var keys []string
					for k := range got {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					t.Fatalf("%d of %d messages missing after 20 s; got:\n%s\n%s", missing, 2*len(want), strings.Join(keys, "\n"), p.Log())
				}
				time.Sleep(50 * time.Millisecond)
			}

			clients := map[netip.Addr]bool{}
			for _, w := range want {
				clients[w.client] = true
			}
			for _, m := range f.sink.snapshot() {
				if m.Identity != identity {
					t.Errorf("identity %q, want %q (%+v)", m.Identity, identity, m)
				}
				if !clients[m.Client] {
					continue // the readiness probes, from 127.0.0.1
				}
				if m.QType != dns.TypeA || m.QClass != dns.ClassINET || m.ClientPort == 0 || m.Time.IsZero() {
					t.Errorf("message %+v: want type A, class IN, a port and a time", m)
				}
				if d := time.Since(m.Time); d < -time.Minute || d > time.Minute {
					t.Errorf("message time %v, %v from now", m.Time, d)
				}
				if m.Type == dnstap.ClientQuery && m.Rcode != -1 {
					t.Errorf("query with rcode %d", m.Rcode)
				}
				if m.Type == dnstap.ClientResponse {
					ok := false
					for _, w := range want {
						if w.client == m.Client && w.name == m.Name {
							ok = w.rcode == m.Rcode
						}
					}
					if !ok {
						t.Errorf("response %+v: rcode or name is not what was sent", m)
					}
				}
			}
			t.Logf("%s: %d messages, version %q", tc.vendor, len(f.sink.snapshot()), f.sink.snapshot()[0].Version)
		})
	}
}

// queryFrom sends one UDP query for name A from the address client.
func queryFrom(t *testing.T, client netip.Addr, server netip.AddrPort, name string) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: client.AsSlice()}}}
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, _, err := c.ExchangeContext(ctx, q, server.String())
	if err != nil {
		t.Fatalf("%s from %v: %v", name, client, err)
	}
	return r
}
