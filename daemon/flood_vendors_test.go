package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/internal/lab/dnstest"
	"lbdns/internal/lab/vendors"
	"lbdns/testkit/netns"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// floodVendorAlarms is the [dnstap] and [flood] of TestFloodAlarmFromVendors:
// a floor above the background (about 150 q/s) and below the flood, a
// baseline that follows the background within seconds, a short
// clear_after.
const floodVendorAlarms = `
[dnstap]
unix = %q

[flood]
floor = 300
rise = 4
baseline = "10s"
clear_after = "2s"
`

// zipfNames returns n names of up drawn from a Zipf law (s 1.2) over
// distinct labels bg0, bg1, ...: the background's names, most queries
// for a few of them (seeded: the same list every run).
func zipfNames(up *dnstest.Server, seed uint64, n int) []string {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, 1)), 1.2, 1, 49)
	out := make([]string, n)
	for i := range out {
		out[i] = up.Name(fmt.Sprintf("bg%d", z.Uint64()))
	}
	return out
}

// TestFloodAlarmFromVendors: Debian's Unbound, BIND and Knot Resolver,
// each answering from a loopback authoritative server, send dnstap of
// their client queries to a running lbdnsd ([dnstap] on a Unix socket,
// [flood] on). Eleven background clients query the resolver at Zipf
// rates (50 q/s down, about 150 q/s in all) for Zipf names: the loudest
// one is a client in a network namespace of its own, the others are
// loopback source addresses 127.0.0.10-19. Then a client in another
// network namespace floods one name at a bounded rate. Each namespace is
// joined to the test's by a veth pair (testkit/netns, 198.18.0.0/15);
// the resolver listens also on the root end of each pair and answers
// their networks (vendors.Options Listen and Allow), so the clients'
// queries cross a link and reach it from their own addresses. The rise
// alarm of the dnstap source names the flooding namespace's address,
// its /24 and the name first, a share alarm names that client, and GET
// /v1/top puts both first, with the background namespace's client
// listed under its own address. It needs root and iproute2 (skipped
// without, failed when LBDNS_REQUIRE_NETNS=1).
func TestFloodAlarmFromVendors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three resolver products and floods each for seconds")
	}
	for _, v := range []vendors.Vendor{vendors.Unbound, vendors.BIND, vendors.Knot} {
		t.Run(string(v), func(t *testing.T) { floodFromVendor(t, v) })
	}
}

func floodFromVendor(t *testing.T, v vendors.Vendor) {
	vendors.Require(t, v)
	flood := netns.New(t, "flood-"+string(v))
	bgNS := netns.New(t, "flood-bg-"+string(v))
	up := dnstest.NewServer(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "dnstap.sock")
	path := writeConfig(t, dir, fmt.Sprintf(floodVendorAlarms, sock))
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d, fp, nil)
	identity := "lbdns-flood-" + string(v)
	p := vendors.StartWith(t, v, up.Addr(), vendors.Options{
		Dnstap: &vendors.Dnstap{Unix: sock, Identity: identity},
		Listen: []netip.Addr{flood.RootAddrV4(), bgNS.RootAddrV4()},
		Allow:  []netip.Prefix{netip.PrefixFrom(flood.AddrV4(), 30), netip.PrefixFrom(bgNS.AddrV4(), 30)},
	})
	// inNS returns a UDP socket inside h and the resolver's address on
	// the root end of h's link.
	inNS := func(h *netns.Host) (net.PacketConn, netip.AddrPort) {
		pc, err := h.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		return pc, netip.AddrPortFrom(h.RootAddrV4(), p.Addr.Port())
	}

	// Background: client i every 20 ms × (i+1) (50, 25, 17 ... 5 q/s),
	// each through its own rotation of 600 Zipf names, at most 60 s; the
	// first from the background namespace, then 127.0.0.10-19.
	stopBG := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stopBG); wg.Wait() }()
	for i := range 11 {
		names := zipfNames(up, uint64(i), 600)
		every := 20 * time.Millisecond * time.Duration(i+1)
		if i == 0 {
			pc, to := inNS(bgNS)
			wg.Go(func() { floodPackets(pc, to, names, every, 1, int(time.Minute/every), stopBG) })
			continue
		}
		from := netip.AddrFrom4([4]byte{127, 0, 0, byte(9 + i)})
		wg.Go(func() { floodSender(t, p.Addr, from, names, every, 1, int(time.Minute/every), stopBG) })
	}
	c := control.NewClient(d.ControlSocket())
	poll.Until(t, 25*time.Second, "the dnstap rate counted", func() (bool, string) {
		for _, r := range d.Flood().Counters().Rates {
			if r.Source == "dnstap" && r.Baseline > 60 {
				return true, ""
			}
		}
		return false, fmt.Sprint(d.Flood().Counters().Rates, "\n", p.Log())
	})
	if act := d.Flood().Active(); len(act) != 0 {
		t.Fatalf("alarms before the flood: %+v", act)
	}

	// The flood: the flooding namespace asks www at up to 1500 q/s, at
	// most 30,000 queries (20 s).
	flooder := flood.AddrV4()
	www := strings.ToLower(up.Name("www"))
	stopFlood := make(chan struct{})
	flooded := make(chan int, 1)
	pc, to := inNS(flood)
	go func() {
		flooded <- floodPackets(pc, to, []string{www}, 10*time.Millisecond, 15, 30000, stopFlood)
	}()
	endFlood := sync.OnceValue(func() int { close(stopFlood); return <-flooded })
	defer endFlood()
	evs := waitFloodAlarms(t, c, 20*time.Second, "dnstap", "clients "+flooder.String())
	rise, share := evs[0], evs[1]
	t.Logf("alarm: %s", rise.Message)
	prefix := netip.PrefixFrom(flooder, 24).Masked()
	for _, want := range []string{"flood alarm: dnstap at ", "top clients: " + flooder.String() + " ", "prefixes: " + prefix.String() + " ", "names: " + www + " "} {
		if !strings.Contains(rise.Message, want) {
			t.Errorf("alarm event %q lacks %q", rise.Message, want)
		}
	}
	if !strings.HasPrefix(share.Message, "flood alarm: client "+flooder.String()+" has ") {
		t.Errorf("share alarm event %q", share.Message)
	}
	checkTopFirst(t, c, control.TopDnstap, map[string]string{"clients": flooder.String(), "names": www})
	top, err := c.Top(context.Background(), control.TopDnstap, "clients", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(top.Entries, func(e control.TopEntry) bool { return e.Key == bgNS.AddrV4().String() }) {
		t.Errorf("top clients %+v lack the background namespace's client %s", top.Entries, bgNS.AddrV4())
	}
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Dnstap == nil || len(st.Dnstap.Senders) == 0 || st.Dnstap.Senders[0].Identity != identity {
		t.Errorf("status dnstap senders %+v, want %s", st.Dnstap, identity)
	}
	t.Logf("%s: flood of %d queries from %s", v, endFlood(), flooder)
}
