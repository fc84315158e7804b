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
	"lbdns/intent"
	"lbdns/testkit/poll"
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
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: from.AsSlice()})
	if err != nil {
		t.Error(err)
		return 0
	}
	return floodPackets(c, addr, names, every, perTick, max, stop)
}

// floodPackets is floodSender from c (for a socket made elsewhere, such
// as inside a network namespace), which it closes.
func floodPackets(c net.PacketConn, addr netip.AddrPort, names []string, every time.Duration, perTick, max int, stop <-chan struct{}) int {
	defer c.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	wires := make([][]byte, len(names))
	for i, n := range names {
		wires[i], _ = new(dns.Msg).SetQuestion(n, dns.TypeA).Pack()
	}
	to := net.UDPAddrFromAddrPort(addr)
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
			if _, err := c.WriteTo(wires[sent%len(wires)], to); err != nil {
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

// checkTopFirst fails t unless GET /v1/top of the last 10 s of source's
// queries, through c, puts first the key firsts[kind] of each kind, its
// count above its error.
func checkTopFirst(t testing.TB, c *control.Client, source string, firsts map[string]string) {
	t.Helper()
	for kind, want := range firsts {
		rep, err := c.Top(context.Background(), source, kind, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Entries) == 0 || rep.Entries[0].Key != want || rep.Entries[0].Count < rep.Entries[0].Error {
			t.Errorf("top %s: %+v, want %s first", kind, rep.Entries, want)
		}
	}
}

// floodScene is a daemon of the flood test's configuration (and extra)
// whose responder gets background queries from twenty clients for
// twenty names at a bounded rate, then a flood of one name from
// 127.0.0.99; its client actions are never enforced (the enforcer's
// namespace does not exist: clientfw's tests enforce them).
type floodScene struct {
	d    *Daemon
	c    *control.Client
	addr netip.AddrPort
	// alarm and share are the events of the responder's rate alarm and
	// of the flooding client's share alarm.
	alarm, share control.Event
	stopFlood    func()
	flooded      chan int
}

// startFloodScene starts the scene and returns once both alarms are
// raised; the background and the flood stop at the test's end.
func startFloodScene(t *testing.T, extra string) *floodScene {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	doc := fmt.Sprintf(gslbOnly, dir) + fmt.Sprintf(twoMembers, "100ms", port) + manyNames(20) + fmt.Sprintf(floodAlarms, 1000) + extra
	path := filepath.Join(dir, "lbdns.toml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	d, err := New(Options{ConfigPath: path, Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond, ClientsNetNS: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d, fp, nil)
	s := &floodScene{d: d, c: control.NewClient(d.ControlSocket()), addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))}
	poll.Until(t, 10*time.Second, "the GSLB names answered", func() (bool, string) {
		got := askA(t, s.addr.String(), "n0.gslb.example.")
		return len(got) == 2, fmt.Sprint(got)
	})

	// Background: 20 clients 127.0.0.10-29, 20 names, 400 q/s in all,
	// for at most 60 s.
	stopBG := make(chan struct{})
	var wg sync.WaitGroup
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("n%d.gslb.example.", i))
	}
	for i := range 20 {
		from := netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
		mine := append(slices.Clone(names[i:]), names[:i]...)
		wg.Go(func() { floodSender(t, s.addr, from, mine, 50*time.Millisecond, 1, 1200, stopBG) })
	}
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
	s.stopFlood = sync.OnceFunc(func() { close(stopFlood) })
	s.flooded = make(chan int, 1)
	wg.Go(func() {
		s.flooded <- floodSender(t, s.addr, netip.MustParseAddr("127.0.0.99"), []string{"N7.gslb.example."}, 10*time.Millisecond, 50, 50000, stopFlood)
	})
	t.Cleanup(func() { s.stopFlood(); close(stopBG); wg.Wait() })
	// Two alarms: the responder's rate rose over 4 times its
	// baseline, and the client took more than half of the queries.
	evs := waitFloodAlarms(t, s.c, 15*time.Second, "responder", "clients 127.0.0.99")
	s.alarm, s.share = evs[0], evs[1]
	return s
}

// stopAndClear stops the flood and waits for both alarms to clear: by
// then every automatic action of their raising has been taken (the
// alarms are handled in order).
func (s *floodScene) stopAndClear(t *testing.T) {
	t.Helper()
	s.stopFlood()
	t.Logf("flood: %d queries", <-s.flooded)
	poll.Until(t, 30*time.Second, "the alarms cleared", func() (bool, string) {
		evs, err := s.c.Events(context.Background(), s.alarm.Seq)
		if err != nil {
			return false, err.Error()
		}
		cleared := map[string]bool{}
		for _, ev := range evs.Events {
			if ev.Kind == control.EventFlood && !ev.Error && strings.HasPrefix(ev.Message, "flood alarm cleared: ") {
				cleared[ev.Subject] = true
			}
		}
		return cleared["responder"] && cleared["clients 127.0.0.99"] && len(s.d.Flood().Active()) == 0, fmt.Sprint(cleared, s.d.Flood().Counters().Rates)
	})
}

// TestFloodAlarm: among background queries from twenty clients for
// twenty names at a bounded rate, one client floods one name; the
// responder's readers count it, the alarm event
// names that client and that name, GET /v1/top puts them first, the
// name's TTL is raised (auto_ttl_raise: a TTL raise of the intent, by
// the flood alarm), the client is limited ([actions] enabled: a limit
// of the intent, by the flood alarm, for auto_for, once for both
// alarms), and the alarms clear once the flood stops.
func TestFloodAlarm(t *testing.T) {
	s := startFloodScene(t, "\n[actions]\nenabled = true\ndefault_limit_qps = 40\nauto_for = \"15m\"\n")
	d, c, addr, alarm, share := s.d, s.c, s.addr, s.alarm, s.share
	for _, want := range []string{"flood alarm: responder at", "top clients: 127.0.0.99 ", "prefixes: 127.0.0.0/24 ", "names: n7.gslb.example. "} {
		if !strings.Contains(alarm.Message, want) {
			t.Errorf("alarm event %q lacks %q", alarm.Message, want)
		}
	}
	if !strings.HasPrefix(share.Message, "flood alarm: client 127.0.0.99 has ") {
		t.Errorf("share alarm event %q", share.Message)
	}
	// The heavy hitters of the last 10 s, as lbctl top reads them.
	checkTopFirst(t, c, control.TopResponder, map[string]string{"clients": "127.0.0.99", "names": "n7.gslb.example.", "nametypes": "n7.gslb.example. A", "suffixes": "n7.gslb.example."})
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
	if _, err := c.Top(context.Background(), control.TopResponder, "clients", time.Hour); err == nil || !strings.Contains(err.Error(), "at most 1m0s") {
		t.Errorf("a window beyond the long window: %v", err)
	}

	// The automatic limit: in the intent with its expiry, who and why,
	// and in /status.
	var lim intent.ClientAction
	poll.Until(t, 5*time.Second, "the automatic limit", func() (bool, string) {
		cl := d.intentNow().Clients
		if len(cl) != 1 {
			return false, fmt.Sprintf("%+v", cl)
		}
		lim = cl[0]
		return true, ""
	})
	if lim.Client != netip.MustParsePrefix("127.0.0.99/32") || lim.Action != intent.ActionLimit || lim.Rate != 40 || lim.By != "lbdnsd (flood alarm)" ||
		!lim.Until.Equal(lim.Set.Add(15*time.Minute)) || !strings.HasPrefix(lim.Reason, "flood alarm ") || !strings.Contains(lim.Reason, "127.0.0.99 at ") {
		t.Errorf("automatic limit: %+v", lim)
	}
	s.stopAndClear(t)
	cs, got := clientEntries(t, d)
	if !cs.Automatic || len(got) != 1 || got[0] != "limit 127.0.0.99 40/s" || cs.Entries[0].By != "lbdnsd (flood alarm)" || cs.Entries[0].Reason != lim.Reason ||
		!cs.Entries[0].Until.Equal(lim.Until) {
		t.Errorf("status clients after both alarms: %+v %q", cs, got)
	}
}

// TestFloodAutoLimitNot: no automatic limit with [actions] enabled =
// false, nor for an allowlisted client (refused with a warning event
// once per alarm).
func TestFloodAutoLimitNot(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		s := startFloodScene(t, "")
		s.stopAndClear(t)
		if cs, got := clientEntries(t, s.d); cs.Automatic || len(got) != 0 {
			t.Errorf("client actions with [actions] enabled = false: %q", got)
		}
	})
	t.Run("allowlisted", func(t *testing.T) {
		s := startFloodScene(t, "\n[actions]\nenabled = true\nallow = [\"127.0.0.96/30\"]\n")
		s.stopAndClear(t)
		if _, got := clientEntries(t, s.d); len(got) != 0 {
			t.Errorf("client actions for an allowlisted client: %q", got)
		}
		evs, err := s.c.Events(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		per := map[string]int{}
		for _, ev := range evs.Events {
			if ev.Kind == control.EventClient && ev.Subject == "127.0.0.99" {
				if !ev.Error || !strings.Contains(ev.Message, ": no automatic limit of 127.0.0.99: ") || !strings.Contains(ev.Message, "actions.allow[0]") {
					t.Errorf("client event %q", ev.Message)
				}
				id, _, _ := strings.Cut(strings.TrimPrefix(ev.Message, "flood alarm "), ": no automatic")
				per[id]++
			}
		}
		if per["responder"] != 1 || per["share responder clients 127.0.0.99"] != 1 || per["share responder prefixes 127.0.0.0/24"] != 1 || len(per) != 3 {
			t.Errorf("refusals per alarm: %v, want one for each of the three (the rate, the client's share, its /24's share)", per)
		}
	})
}
