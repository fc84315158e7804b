//go:build ipvsvm

package vip_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/testkit/ipvsvm"
	"lbdns/vip"
)

// backend is a DNS server on one real-server address that answers every
// TXT query with its own name and counts the queries it got.
type backend struct {
	name string
	hits atomic.Int64
}

// startBackend serves UDP and TCP DNS on a, until the test ends.
func startBackend(t *testing.T, a netip.AddrPort) *backend {
	t.Helper()
	b := &backend{name: a.Addr().String()}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, q *dns.Msg) {
		b.hits.Add(1)
		m := new(dns.Msg)
		m.SetReply(q)
		m.Answer = append(m.Answer, &dns.TXT{
			Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET},
			Txt: []string{b.name},
		})
		w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp", a.String())
	if err != nil {
		t.Fatalf("listen udp %s: %v", a, err)
	}
	ln, err := net.Listen("tcp", a.String())
	if err != nil {
		t.Fatalf("listen tcp %s: %v", a, err)
	}
	// The sockets are bound already, so queries queue until the servers
	// run; no start-up wait is needed.
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: mux}, {Listener: ln, Handler: mux}} {
		go srv.ActivateAndServe()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.ShutdownContext(ctx)
		})
	}
	return b
}

// sourcePorts hands out the UDP source ports of a test's queries, each
// used once, below the kernel's ephemeral range (32768 on): IPVS keeps a
// UDP "connection" per client address and port for minutes, and a query
// from a port an earlier one used goes to that one's real server (a
// weight of 0 stops only new connections), so a kernel-chosen port that
// happened to repeat one of an earlier step would ask a drained server
// again. Give each test its own base.
type sourcePorts struct{ next int }

// port returns the next unused port.
func (s *sourcePorts) port() int {
	s.next++
	return s.next
}

// askVIP sends n TXT queries to vip over network, each from a new socket
// (UDP: from a port of src never used before; so IPVS schedules each one
// afresh), and returns the answering names in sorted order without
// duplicates. Every query must be answered.
func askVIP(t *testing.T, network string, v netip.AddrPort, n int, src *sourcePorts) []string {
	t.Helper()
	seen := map[string]bool{}
	for i := range n {
		c := &dns.Client{Net: network, Timeout: 2 * time.Second}
		if network == "udp" {
			c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{Port: src.port()}}
		}
		q := new(dns.Msg)
		q.SetQuestion(fmt.Sprintf("q%d.vm.test.", i), dns.TypeTXT)
		r, _, err := c.Exchange(q, v.String())
		if err != nil {
			t.Fatalf("%s query %d to %s: %v", network, i, v, err)
		}
		if len(r.Answer) != 1 {
			t.Fatalf("%s query %d to %s: %d answers, want 1", network, i, v, len(r.Answer))
		}
		txt, ok := r.Answer[0].(*dns.TXT)
		if !ok || len(txt.Txt) != 1 {
			t.Fatalf("%s query %d to %s: answer %v", network, i, v, r.Answer[0])
		}
		seen[txt.Txt[0]] = true
	}
	var names []string
	for name := range seen {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestVMDataPath sends DNS queries to the VIPs inside the VM and checks that
// only the back ends in the desired table answer as it changes: NAT to real
// servers on local addresses of a dummy interface, UDP and TCP, IPv4 and
// IPv6.
func TestVMDataPath(t *testing.T) {
	ipvsvm.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ipvsvm.Run(t, "ipvsadm", "-C")
	t.Cleanup(func() { ipvsvm.Run(t, "ipvsadm", "-C") })

	ipvsvm.Sh(t, "ip link add lbdnsdp0 type dummy && ip link set lbdnsdp0 up")
	t.Cleanup(func() { ipvsvm.Sh(t, "ip link del lbdnsdp0") })
	vips := []netip.Addr{vip4, vip6}
	backends := map[netip.AddrPort]*backend{}
	for _, v := range vips {
		bits := v.BitLen()
		// The VIP goes on through the daemon's own code; the real
		// servers' addresses with ip.
		p := netip.PrefixFrom(v, bits)
		for i, want := range []bool{true, false} {
			added, err := vip.EnsureAddress("lbdnsdp0", p)
			if err != nil {
				t.Fatalf("EnsureAddress(%s) call %d: %v", p, i+1, err)
			}
			if added != want {
				t.Errorf("EnsureAddress(%s) call %d added=%v, want %v", p, i+1, added, want)
			}
		}
		if out := ipvsvm.Run(t, "ip", "addr", "show", "dev", "lbdnsdp0"); !strings.Contains(out, p.String()) {
			t.Fatalf("ip addr show lacks %s after EnsureAddress:\n%s", p, out)
		}
		for i := 1; i <= 3; i++ {
			ipvsvm.Sh(t, fmt.Sprintf("ip addr add %s/%d dev lbdnsdp0", rs(v, i).Addr(), bits))
		}
	}
	for _, v := range vips {
		for i := 1; i <= 3; i++ {
			backends[rs(v, i)] = startBackend(t, rs(v, i))
		}
	}

	r := vip.NewReconciler(newKernel(t), ownVIPs(vips...))
	desired := dnsTable("rr", 3, vips...)
	if _, err := r.Resync(ctx, desired); err != nil {
		t.Fatalf("Resync: %v", err)
	}

	// setWeight sets server n's weight on every service; -1 removes it.
	setWeight := func(n, w int) func(vip.Table) {
		return func(d vip.Table) {
			for k, s := range d {
				a := rs(k.Addr, n)
				if w < 0 {
					delete(s.Dests, a)
					continue
				}
				s.Dests[a] = vip.Destination{Addr: a, Weight: uint32(w), Forwarding: vip.NAT}
			}
		}
	}
	steps := []struct {
		name    string
		edits   []func(vip.Table)
		healthy []int
	}{
		{"all healthy", nil, []int{1, 2, 3}},
		{"server 3 removed", []func(vip.Table){setWeight(3, -1)}, []int{1, 2}},
		{"server 2 at weight 0", []func(vip.Table){setWeight(2, 0)}, []int{1}},
		{"all back", []func(vip.Table){setWeight(2, 1), setWeight(3, 1)}, []int{1, 2, 3}},
	}
	const queries = 12 // per step, network and family: 4 rounds of rr over 3
	src := &sourcePorts{next: 20000}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			for _, e := range st.edits {
				e(desired)
			}
			if _, err := r.Sync(ctx, desired); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			for _, v := range vips {
				var want []string
				var unhealthy []*backend
				for i := 1; i <= 3; i++ {
					if slices.Contains(st.healthy, i) {
						want = append(want, rs(v, i).Addr().String())
					} else {
						unhealthy = append(unhealthy, backends[rs(v, i)])
					}
				}
				slices.Sort(want)
				for _, network := range []string{"udp", "tcp"} {
					t.Run(fmt.Sprintf("%s %s", network, v), func(t *testing.T) {
						before := make([]int64, len(unhealthy))
						for i, b := range unhealthy {
							before[i] = b.hits.Load()
						}
						got := askVIP(t, network, netip.AddrPortFrom(v, 53), queries, src)
						if !slices.Equal(got, want) {
							t.Errorf("answered by %v, want exactly %v", got, want)
						}
						for i, b := range unhealthy {
							if n := b.hits.Load(); n != before[i] {
								t.Errorf("out-of-service back end %s got %d new queries", b.name, n-before[i])
							}
						}
					})
				}
			}
		})
	}
	t.Logf("ipvsadm -Ln --stats:\n%s", ipvsvm.Run(t, "ipvsadm", "-Ln", "--stats"))
}
