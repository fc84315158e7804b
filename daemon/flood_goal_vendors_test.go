package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
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

// TestFloodNamedThroughUnbound: with [flood] at its defaults, Debian's
// Unbound sends dnstap of its client queries to lbdnsd. Twenty loopback
// clients query it in the background at 20 q/s each (400 q/s, Zipf
// names); five times, a client in a network namespace of its own floods
// one name at 3 times that (1200 q/s) for 4 s. Each time, the first
// alarm event naming that client first among the top clients and that
// name first among the names, of the resolvers' (dnstap) queries, and
// the client's share alarm (naming them alike), are journaled within 2 s
// of the flood's first query (the events' times against the test's
// clock), and every alarm has cleared within 15 s of the flood's last
// query while the background goes on. It needs root and iproute2
// (skipped without, failed when LBDNS_REQUIRE_NETNS=1).
func TestFloodNamedThroughUnbound(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a resolver five times for seconds")
	}
	vendors.Require(t, vendors.Unbound)
	fl := netns.New(t, "goal-flood")
	up := dnstest.NewServer(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "dnstap.sock")
	path := writeConfig(t, dir, fmt.Sprintf("\n[dnstap]\nunix = %q\n", sock)) // [flood] as it comes
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d, fp, nil)
	p := vendors.StartWith(t, vendors.Unbound, up.Addr(), vendors.Options{
		Dnstap: &vendors.Dnstap{Unix: sock, Identity: "lbdns-goal"},
		Listen: []netip.Addr{fl.RootAddrV4()},
		Allow:  []netip.Prefix{netip.PrefixFrom(fl.AddrV4(), 30)},
	})
	c := control.NewClient(d.ControlSocket())

	// The background: 127.0.0.10-29, each every 50 ms through its own
	// rotation of Zipf names, at most 5 minutes.
	stopBG := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stopBG); wg.Wait() }()
	for i := range 20 {
		names := zipfNames(up, uint64(100+i), 600)
		from := netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
		wg.Go(func() { floodSender(t, p.Addr, from, names, 50*time.Millisecond, 1, 6000, stopBG) })
	}
	poll.Until(t, 30*time.Second, "the background counted through dnstap", func() (bool, string) {
		for _, r := range d.Flood().Counters().Rates {
			if r.Source == "dnstap" && r.Rate > 300 {
				return true, ""
			}
		}
		return false, fmt.Sprint(d.Flood().Counters().Rates, "\n", p.Log())
	})
	time.Sleep(3 * time.Second) // the baseline takes the background's rate
	if act := d.Flood().Active(); len(act) != 0 {
		t.Fatalf("alarms before any flood: %+v", act)
	}

	flooder := fl.AddrV4().String()
	name := strings.ToLower(up.Name("www"))
	to := netip.AddrPortFrom(fl.RootAddrV4(), p.Addr.Port())
	lastSeq := func() uint64 {
		evs, err := c.Events(context.Background(), 0)
		if err != nil || len(evs.Events) == 0 {
			return 0
		}
		return evs.Events[len(evs.Events)-1].Seq
	}
	for trial := 1; trial <= 5; trial++ {
		// Each flood starts at another point of the daemon's second
		// (the previous clearing came at the end of one).
		time.Sleep(time.Duration(trial-1) * 230 * time.Millisecond)
		after := lastSeq()
		pc, err := fl.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		sent := floodPackets(pc, to, []string{name}, 10*time.Millisecond, 12, 4800, nil)
		end := time.Now()
		// Named: the first raised alarm whose top client and top name,
		// of the resolvers' queries, are the flooder and its name; and
		// the flooder's share alarm (which does not hang on how far the
		// baseline has learned the background).
		var named, share *control.Event
		poll.Until(t, 5*time.Second, fmt.Sprintf("trial %d: alarms naming %s and %s", trial, flooder, name), func() (bool, string) {
			evs, err := c.Events(context.Background(), after)
			if err != nil {
				return false, err.Error()
			}
			var seen []string
			named, share = nil, nil
			for _, ev := range evs.Events {
				if ev.Kind != control.EventFlood || !ev.Error {
					continue
				}
				seen = append(seen, ev.Message)
				if !strings.Contains(ev.Message, "of the resolvers' (dnstap) queries, top clients: "+flooder+" ") || !strings.Contains(ev.Message, "; names: "+name+" ") {
					continue
				}
				if named == nil {
					named = &ev
				}
				if ev.Subject == "clients "+flooder && strings.HasPrefix(ev.Message, "flood alarm: client "+flooder+" has ") {
					share = &ev
				}
			}
			return named != nil && share != nil, strings.Join(seen, "\n")
		})
		for _, ev := range []*control.Event{named, share} {
			if late := ev.Time.Sub(start); late > 2*time.Second {
				t.Errorf("trial %d: %s and %s named %v after the flood's start, want within 2s: %s", trial, flooder, name, late.Round(time.Millisecond), ev.Message)
			} else {
				t.Logf("trial %d: %d queries in %v; named %v after the start: %s", trial, sent, end.Sub(start).Round(time.Millisecond), late.Round(time.Millisecond), ev.Message)
			}
		}
		// Cleared: no alarm left, within 15 s of the flood's end, the
		// background going on.
		poll.Until(t, 20*time.Second, fmt.Sprintf("trial %d: every alarm cleared", trial), func() (bool, string) {
			act := d.Flood().Active()
			return len(act) == 0, fmt.Sprint(act)
		})
		evs, err := c.Events(context.Background(), after)
		if err != nil {
			t.Fatal(err)
		}
		var cleared time.Time // the last clearing's
		for _, ev := range evs.Events {
			if ev.Kind == control.EventFlood && strings.HasPrefix(ev.Message, "flood alarm cleared: ") && ev.Time.After(cleared) {
				cleared = ev.Time
			}
		}
		if cleared.IsZero() {
			t.Fatalf("trial %d: no clearing journaled", trial)
		}
		if late := cleared.Sub(end); late > 15*time.Second {
			t.Errorf("trial %d: the alarms cleared %v after the flood's end, want within 15s", trial, late.Round(time.Millisecond))
		} else {
			t.Logf("trial %d: cleared %v after the end", trial, late.Round(time.Millisecond))
		}
		if r := dnstapRate(d); r < 300 {
			t.Fatalf("trial %d: the background stopped (dnstap at %.0f/s)", trial, r)
		}
	}
}

// dnstapRate is the dnstap source's last rate.
func dnstapRate(d *Daemon) float64 {
	for _, r := range d.Flood().Counters().Rates {
		if r.Source == "dnstap" {
			return r.Rate
		}
	}
	return 0
}
