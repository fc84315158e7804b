package daemon

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/internal/poll"
)

// floodAlarms is the [flood] of the flood test: a floor above the
// background, a baseline that follows it within seconds, a short
// clear_after, and the automatic TTL raise on.
const floodAlarms = `
[flood]
floor = %d
rise = 4
baseline = "10s"
clear_after = "2s"
auto_ttl_raise = 300
`

// floodSender sends queries for names to the responder at addr from
// the client address from, perTick every every, until stop is closed or
// max queries are sent; it reads and drops the replies. It returns how
// many it sent.
func floodSender(t testing.TB, addr netip.AddrPort, from netip.Addr, names []string, every time.Duration, perTick, max int, stop <-chan struct{}) int {
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: from.AsSlice()}, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Error(err)
		return 0
	}
	defer c.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	wires := make([][]byte, len(names))
	for i, n := range names {
		wires[i], _ = new(dns.Msg).SetQuestion(n, dns.TypeA).Pack()
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	sent := 0
	for sent < max {
		select {
		case <-stop:
			return sent
		case <-tick.C:
		}
		for range perTick {
			if _, err := c.Write(wires[sent%len(wires)]); err != nil {
				return sent
			}
			sent++
		}
	}
	return sent
}

// waitFloodAlarms polls the daemon's events through c for up to timeout
// until a raised flood alarm event of each subject is there ("responder",
// "dnstap", "clients ADDR"...), and returns them in the subjects' order.
func waitFloodAlarms(t testing.TB, c *control.Client, timeout time.Duration, subjects ...string) []control.Event {
	t.Helper()
	got := make([]control.Event, len(subjects))
	poll.Until(t, timeout, fmt.Sprintf("the flood alarm events of %q", subjects), func() (bool, string) {
		evs, err := c.Events(context.Background(), 0)
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Events {
			if ev.Kind != control.EventFlood || !ev.Error {
				continue
			}
			if i := slices.Index(subjects, ev.Subject); i >= 0 {
				got[i] = ev
			}
		}
		for _, ev := range got {
			if ev.Seq == 0 {
				return false, fmt.Sprintf("%d events, got %+v", len(evs.Events), got)
			}
		}
		return true, ""
	})
	return got
}

// checkTopFirst fails t unless GET /v1/top of the last 10 s, through c,
// puts first the key firsts[kind] of each kind, its count above its
// error.
func checkTopFirst(t testing.TB, c *control.Client, firsts map[string]string) {
	t.Helper()
	for kind, want := range firsts {
		rep, err := c.Top(context.Background(), kind, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Entries) == 0 || rep.Entries[0].Key != want || rep.Entries[0].Count < rep.Entries[0].Error {
			t.Errorf("top %s: %+v, want %s first", kind, rep.Entries, want)
		}
	}
}

// TestFloodAlarm: among background queries from twenty clients for
// twenty names at a bounded rate, one client floods one name; the
// responder's readers count it before any reply cache, the alarm event
// names that client and that name, GET /v1/top puts them first, the
// name's TTL is raised (auto_ttl_raise: a TTL raise of the intent, by
// the flood alarm), and the alarm clears once the flood stops.
func TestFloodAlarm(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	doc := fmt.Sprintf(gslbOnly, dir) + fmt.Sprintf(twoMembers, "100ms", port) + manyNames(20) + fmt.Sprintf(floodAlarms, 1000)
	path := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: path, Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d, fp, nil)
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	poll.Until(t, 10*time.Second, "the GSLB names answered", func() (bool, string) {
		got := askA(t, addr.String(), "n0.gslb.example.")
		return len(got) == 2, fmt.Sprint(got)
	})

	// Background: 20 clients 127.0.0.10-29, 20 names, 400 q/s in all,
	// for at most 60 s.
	stopBG := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stopBG); wg.Wait() }()
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("n%d.gslb.example.", i))
	}
	for i := range 20 {
		from := netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
		mine := append(slices.Clone(names[i:]), names[:i]...)
		wg.Go(func() { floodSender(t, addr, from, mine, 50*time.Millisecond, 1, 1200, stopBG) })
	}
	c := control.NewClient(d.ControlSocket())
	// The baseline: the responder's rate counted for a few seconds.
	poll.Until(t, 20*time.Second, "the responder's rate counted", func() (bool, string) {
		for _, r := range d.Flood().Counters().Rates {
			if r.Source == "responder" && r.Baseline > 250 {
				return true, ""
			}
		}
		return false, fmt.Sprint(d.Flood().Counters().Rates)
	})
	if act := d.Flood().Active(); len(act) != 0 {
		t.Fatalf("alarms before the flood: %+v", act)
	}

	// The flood: 127.0.0.99 asks n7 at 5000 q/s, for at most 10 s.
	stopFlood := make(chan struct{})
	flooded := make(chan int, 1)
	go func() {
		flooded <- floodSender(t, addr, netip.MustParseAddr("127.0.0.99"), []string{"N7.gslb.example."}, 10*time.Millisecond, 50, 50000, stopFlood)
	}()
	// Two alarms: the responder's rate rose over 4 times its
	// baseline, and the client took more than half of the queries.
	evs := waitFloodAlarms(t, c, 15*time.Second, "responder", "clients 127.0.0.99")
	alarm, share := evs[0], evs[1]
	for _, want := range []string{"flood alarm: responder at", "top clients: 127.0.0.99 ", "prefixes: 127.0.0.0/24 ", "names: n7.gslb.example. "} {
		if !strings.Contains(alarm.Message, want) {
			t.Errorf("alarm event %q lacks %q", alarm.Message, want)
		}
	}
	if !strings.HasPrefix(share.Message, "flood alarm: client 127.0.0.99 has ") {
		t.Errorf("share alarm event %q", share.Message)
	}
	// The heavy hitters of the last 10 s, as lbctl top reads them.
	checkTopFirst(t, c, map[string]string{"clients": "127.0.0.99", "names": "n7.gslb.example.", "nametypes": "n7.gslb.example. A", "suffixes": "n7.gslb.example."})
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Flood == nil || !st.Flood.On || len(st.Flood.Alarms) == 0 || st.Flood.Alarms[0].Top[0].Entries[0].Key != "127.0.0.99" {
		t.Errorf("status: %+v", st.Flood)
	}
	// The automatic TTL raise: in the intent, with who and why, and in
	// the answers.
	poll.Until(t, 5*time.Second, "the automatic TTL raise", func() (bool, string) {
		st, err := c.Status(context.Background())
		if err != nil {
			return false, err.Error()
		}
		for _, gi := range st.GSLBIntent {
			if gi.Kind == "ttl" && gi.Name == "n7.gslb.example." && gi.Seconds == 300 && gi.By == "lbdnsd (flood alarm)" && strings.Contains(gi.Reason, "auto_ttl_raise") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", st.GSLBIntent)
	})
	m := new(dns.Msg).SetQuestion("n7.gslb.example.", dns.TypeA)
	if r, _, err := (&dns.Client{Timeout: time.Second}).Exchange(m, addr.String()); err != nil || len(r.Answer) == 0 || r.Answer[0].Header().Ttl < 300 {
		t.Errorf("n7's answer after the raise: %v %v", r, err)
	}
	if _, err := c.Top(context.Background(), "clients", time.Hour); err == nil || !strings.Contains(err.Error(), "at most 1m0s") {
		t.Errorf("a window beyond the long window: %v", err)
	}

	close(stopFlood)
	t.Logf("flood: %d queries", <-flooded)
	poll.Until(t, 30*time.Second, "the alarms cleared", func() (bool, string) {
		evs, err := c.Events(context.Background(), alarm.Seq)
		if err != nil {
			return false, err.Error()
		}
		cleared := map[string]bool{}
		for _, ev := range evs.Events {
			if ev.Kind == control.EventFlood && !ev.Error && strings.HasPrefix(ev.Message, "flood alarm cleared: ") {
				cleared[ev.Subject] = true
			}
		}
		return cleared["responder"] && cleared["clients 127.0.0.99"] && len(d.Flood().Active()) == 0, fmt.Sprint(cleared, d.Flood().Counters().Rates)
	})
}
