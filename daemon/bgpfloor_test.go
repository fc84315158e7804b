//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/testkit/bird"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// refusingClient is an IPVS client over a MemClient whose kernel refuses
// the destinations of the protocols set (as a kernel short of memory, or
// a module missing, would): setting a protocol also removes its
// destinations, so that the daemon's next resync finds them gone and
// cannot put them back.
type refusingClient struct {
	mem *vip.MemClient
	mu  sync.Mutex
	off map[vip.Protocol]bool
}

var errRefused = errors.New("refused by the test's kernel")

func (c *refusingClient) refused(k vip.ServiceKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off[k.Proto]
}

// refuse sets whether the destinations of protocol p are refused.
func (c *refusingClient) refuse(t *testing.T, p vip.Protocol, on bool) {
	t.Helper()
	c.mu.Lock()
	c.off[p] = on
	c.mu.Unlock()
	if !on {
		return
	}
	for k, s := range c.mem.Table() {
		if k.Proto != p {
			continue
		}
		for a := range s.Dests {
			if err := c.mem.DeleteDestination(k, a); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (c *refusingClient) Services() ([]vip.Service, error) { return c.mem.Services() }
func (c *refusingClient) Destinations(k vip.ServiceKey) ([]vip.Destination, error) {
	return c.mem.Destinations(k)
}
func (c *refusingClient) CreateService(s vip.Service) error    { return c.mem.CreateService(s) }
func (c *refusingClient) UpdateService(s vip.Service) error    { return c.mem.UpdateService(s) }
func (c *refusingClient) DeleteService(k vip.ServiceKey) error { return c.mem.DeleteService(k) }
func (c *refusingClient) DeleteDestination(k vip.ServiceKey, a netip.AddrPort) error {
	return c.mem.DeleteDestination(k, a)
}

func (c *refusingClient) CreateDestination(k vip.ServiceKey, d vip.Destination) error {
	if c.refused(k) {
		return errRefused
	}
	return c.mem.CreateDestination(k, d)
}

func (c *refusingClient) UpdateDestination(k vip.ServiceKey, d vip.Destination) error {
	if c.refused(k) {
		return errRefused
	}
	return c.mem.UpdateDestination(k, d)
}

// floorHost is one LB host of TestBGPFloor: its daemon, its router and
// its kernel's IPVS table.
type floorHost struct {
	h      *harness
	router *bird.Router
	ipvs   *refusingClient
}

// prefix returns the host's route decision for 192.0.2.53/32.
func (f *floorHost) prefix(t *testing.T) string {
	t.Helper()
	st, err := f.h.d.Status(context.Background())
	if err != nil || st.BGP == nil || len(st.BGP.Prefixes) != 1 {
		return fmt.Sprintf("status: %v %+v", err, st.BGP)
	}
	p := st.BGP.Prefixes[0]
	return fmt.Sprintf("announced %v MED %d: %s", p.Announced, p.MED, p.Reason)
}

// others is how many other hosts the host's fleet view counts as
// announcing 192.0.2.53/32.
func (f *floorHost) others() int {
	v, _ := f.h.d.bgp.FleetView().Load()
	return len(v.Announcers[netip.MustParsePrefix("192.0.2.53/32")])
}

// TestBGPFloor runs two lbdnsd hosts in one fleet (a real 3-member etcd)
// announcing the same VIP, each to its own BIRD router, with
// min_announcing = 1, and asserts on the routers' tables: when lb1's VIP
// goes partial (its TCP service loses every destination, UDP still
// serves) while lb2 announces it, lb1 withdraws; when lb2's VIP is truly
// dead (no destination at all) it is withdrawn at once although lb1 is
// partial, and lb1, now the last host announcing, keeps its route with
// MED 1000 (held by the floor); when lb2 serves again, lb1 withdraws.
func TestBGPFloor(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	var hosts []*floorHost
	for _, name := range []string{"lb1", "lb2"} {
		r := bird.Start(t, bird.Options{AS: 65000, PeerAS: 65001})
		mem := vip.NewMemClient()
		ipvs := &refusingClient{mem: mem, off: map[vip.Protocol]bool{}}
		path := fleetConfig(t, c, cr, name, "c1", bgpSection(r, "min_announcing = 1"))
		fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
		d, err := New(Options{ConfigPath: path, Client: ipvs, Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, &floorHost{h: run(t, d, fp, mem), router: r, ipvs: ipvs})
	}
	lb1, lb2 := hosts[0], hosts[1]
	for _, f := range hosts {
		f.router.WaitRoute("VIP announced while its pool serves", "192.0.2.53/32", "100", "(65001,100)")
	}
	// lb1 sees lb2 announce (its heartbeat, through etcd) before its VIP
	// goes partial.
	poll.Until(t, 15*time.Second, "lb1 to see lb2 announce", func() (bool, string) {
		return lb1.others() == 1, lb1.prefix(t)
	})

	lb1.ipvs.refuse(t, vip.TCP, true)
	lb1.router.WaitGone("lb1 partial while lb2 announces: withdrawn", "192.0.2.53/32")
	if got := lb1.prefix(t); !strings.Contains(got, "1 other host(s) announce it (lb2), min_announcing 1") {
		t.Errorf("lb1's reason: %s", got)
	}
	lb1.ipvs.refuse(t, vip.TCP, false)
	lb1.router.WaitRoute("lb1 serving again", "192.0.2.53/32", "100", "(65001,100)")

	// lb2 truly dead: withdrawn at once, whatever the floor.
	lb2.ipvs.refuse(t, vip.UDP, true)
	lb2.ipvs.refuse(t, vip.TCP, true)
	lb2.router.WaitGone("lb2 dead: withdrawn", "192.0.2.53/32")
	poll.Until(t, 15*time.Second, "lb1 to see lb2 gone", func() (bool, string) {
		return lb1.others() == 0, lb1.prefix(t)
	})
	// lb1 partial, the last host announcing: held, with the worse MED.
	lb1.ipvs.refuse(t, vip.TCP, true)
	lb1.router.WaitRoute("lb1 partial and alone: held by the floor", "192.0.2.53/32", "1000", "")
	poll.Until(t, 10*time.Second, "lb1 held", func() (bool, string) {
		got := lb1.prefix(t)
		return strings.Contains(got, "announced true MED 1000: held: the fleet's floor keeps it: 0 other host(s) announce it (none), min_announcing 1"), got
	})
	if got := lb2.prefix(t); !strings.Contains(got, "announced false") {
		t.Errorf("lb2 (dead) announces: %s", got)
	}

	// lb2 serves again: lb1 lets its held route go.
	lb2.ipvs.refuse(t, vip.UDP, false)
	lb2.ipvs.refuse(t, vip.TCP, false)
	lb2.router.WaitRoute("lb2 serving again", "192.0.2.53/32", "100", "(65001,100)")
	lb1.router.WaitGone("lb2 back: lb1's held route withdrawn", "192.0.2.53/32")
}
