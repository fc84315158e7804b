package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/internal/dnstest"
	"lbdns/internal/poll"
	"lbdns/internal/vendors"
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
// [flood] on). Ten background clients (127.0.0.10-19, Zipf rates from
// 50 q/s down, Zipf names) query the resolver; then 127.0.0.99 floods one
// name at a bounded rate. The rise alarm of the dnstap source names that
// client and that name first, a share alarm names the client, and GET
// /v1/top puts both first. The clients are distinct loopback source
// addresses (the products' fixtures accept 127.0.0.0/8 only).
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
	p := vendors.StartWith(t, v, up.Addr(), vendors.Options{Dnstap: &vendors.Dnstap{Unix: sock, Identity: identity}})

	// Background: client i every 20 ms × (i+1) (50, 25, 17 ... 5 q/s,
	// about 150 q/s in all), each through its own rotation of 600 Zipf
	// names, at most 60 s.
	stopBG := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stopBG); wg.Wait() }()
	for i := range 10 {
		from := netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
		names := zipfNames(up, uint64(i), 600)
		every := 20 * time.Millisecond * time.Duration(i+1)
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

	// The flood: 127.0.0.99 asks www at up to 1500 q/s, at most 30,000
	// queries (20 s).
	flooder := netip.MustParseAddr("127.0.0.99")
	www := strings.ToLower(up.Name("www"))
	stopFlood := make(chan struct{})
	flooded := make(chan int, 1)
	go func() {
		flooded <- floodSender(t, p.Addr, flooder, []string{www}, 10*time.Millisecond, 15, 30000, stopFlood)
	}()
	endFlood := sync.OnceValue(func() int { close(stopFlood); return <-flooded })
	defer endFlood()
	evs := waitFloodAlarms(t, c, 20*time.Second, "dnstap", "clients "+flooder.String())
	rise, share := evs[0], evs[1]
	t.Logf("alarm: %s", rise.Message)
	for _, want := range []string{"flood alarm: dnstap at ", "top clients: " + flooder.String() + " ", "prefixes: 127.0.0.0/24 ", "names: " + www + " "} {
		if !strings.Contains(rise.Message, want) {
			t.Errorf("alarm event %q lacks %q", rise.Message, want)
		}
	}
	if !strings.HasPrefix(share.Message, "flood alarm: client "+flooder.String()+" has ") {
		t.Errorf("share alarm event %q", share.Message)
	}
	checkTopFirst(t, c, map[string]string{"clients": flooder.String(), "names": www})
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Dnstap == nil || len(st.Dnstap.Senders) == 0 || st.Dnstap.Senders[0].Identity != identity {
		t.Errorf("status dnstap senders %+v, want %s", st.Dnstap, identity)
	}
	t.Logf("%s: flood of %d queries", v, endFlood())
}
