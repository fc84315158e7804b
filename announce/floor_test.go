package announce

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"lbdns/configs"
	"lbdns/fleet"
	"lbdns/hub"
	"lbdns/intent"
)

// TestDecideFloor: every rule of the fleet's announcement floor, on VIP
// v4 (192.0.2.53/32) with min_announcing 1 unless said.
func TestDecideFloor(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	p4 := netip.MustParsePrefix("192.0.2.53/32")
	deg := []configs.Community{65001<<16 | 200}
	up := []configs.Community{65001<<16 | 100}
	gs := configs.GracefulShutdown
	partial := hub.Verdict{Name: "v4", Addr: p4.Addr(), Partial: true, Reason: "not serving: no destination taking traffic on tcp/53 (pool main)"}
	dead := hub.Verdict{Name: "v4", Addr: p4.Addr(), Reason: "not serving: no destination taking traffic on udp/53, tcp/53 (pool main)"}
	alone := &FleetView{Read: true}
	withLB2 := &FleetView{Read: true, Announcers: map[netip.Prefix][]string{p4: {"lb2"}}}
	announced := []netip.Prefix{p4}
	for _, tc := range []struct {
		name      string
		floor     int
		vips      []hub.Verdict
		listeners []hub.Verdict
		view      *FleetView
		announced []netip.Prefix
		drain     *intent.HostDrain
		now       time.Time
		// want of 192.0.2.53/32
		announce, held, draining bool
		med                      uint32
		comms                    []configs.Community
		reason                   string
	}{
		{name: "floor off: a partial VIP is withdrawn", floor: 0, vips: []hub.Verdict{partial}, view: alone, announced: announced,
			reason: "withdrawn: vip v4: not serving"},
		{name: "no fleet: no floor", floor: 1, vips: []hub.Verdict{partial}, announced: announced,
			reason: "withdrawn: vip v4: not serving"},
		{name: "partial, no other host announces: held with the worse MED", floor: 1, vips: []hub.Verdict{partial}, view: alone, announced: announced,
			announce: true, held: true, med: 1000, comms: deg, reason: "held: the fleet's floor keeps it: 0 other host(s) announce it (none), min_announcing 1; vip v4: not serving"},
		{name: "partial, fleet view not read yet: held", floor: 1, vips: []hub.Verdict{partial}, view: &FleetView{}, announced: announced,
			announce: true, held: true, med: 1000, comms: deg, reason: "no fleet view read yet"},
		{name: "partial, another host announces: withdrawn", floor: 1, vips: []hub.Verdict{partial}, view: withLB2, announced: announced,
			reason: "withdrawn: vip v4: not serving: no destination taking traffic on tcp/53 (pool main); 1 other host(s) announce it (lb2), min_announcing 1"},
		{name: "partial, fewer others than the floor: held", floor: 2, vips: []hub.Verdict{partial}, view: withLB2, announced: announced,
			announce: true, held: true, med: 1000, comms: deg, reason: "1 other host(s) announce it (lb2), min_announcing 2"},
		{name: "partial, not announced now: the floor never announces anew", floor: 1, vips: []hub.Verdict{partial}, view: alone,
			reason: "withdrawn: vip v4: not serving: no destination taking traffic on tcp/53 (pool main); 0 other host(s) announce it (none), min_announcing 1; not announced now: the floor keeps a route, it never announces one anew"},
		{name: "truly dead: withdrawn at once whatever the fleet", floor: 1, vips: []hub.Verdict{dead}, view: alone, announced: announced,
			reason: "withdrawn: vip v4: not serving: no destination taking traffic on udp/53, tcp/53"},
		{name: "no verdict: withdrawn", floor: 1, view: alone, announced: announced,
			reason: "no serving verdict yet"},
		{name: "serving: announced up, the floor does nothing", floor: 1, vips: []hub.Verdict{serving("v4", "192.0.2.53")}, view: alone, announced: announced,
			announce: true, med: 100, comms: up, reason: "announced: vip v4"},
		{name: "held and drained by an operator: graceful shutdown during the delay", floor: 1, vips: []hub.Verdict{partial}, view: alone, announced: announced,
			drain: &intent.HostDrain{Set: t0, By: "uid 0"}, now: t0.Add(10 * time.Second),
			announce: true, held: true, draining: true, med: 1000, comms: append(slices.Clone(deg), gs), reason: "draining: GRACEFUL_SHUTDOWN until"},
		{name: "held and drained by an operator: the drain is honoured after the delay", floor: 1, vips: []hub.Verdict{partial}, view: alone, announced: announced,
			drain: &intent.HostDrain{Set: t0, By: "uid 0"}, now: t0.Add(30 * time.Second),
			reason: "withdrawn: host drained since 2026-01-02T03:00:00Z (by uid 0), drain delay 30s over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.BGP.MinAnnouncing = tc.floor
			routes, _ := Decide(Input{Config: cfg, VIPs: tc.vips, Listeners: tc.listeners, Drain: tc.drain, Fleet: tc.view, Announced: tc.announced, Now: tc.now})
			i := slices.IndexFunc(routes, func(r Route) bool { return r.Prefix == p4 })
			if i < 0 {
				t.Fatalf("no route of %s in %+v", p4, routes)
			}
			r := routes[i]
			if r.Announce != tc.announce || r.Held != tc.held || r.Draining != tc.draining || r.MED != tc.med || !slices.Equal(r.Communities, tc.comms) || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("route = %+v\nwant announce %v held %v draining %v MED %d communities %v reason containing %q",
					r, tc.announce, tc.held, tc.draining, tc.med, tc.comms, tc.reason)
			}
			if r.Held && !r.Degraded {
				t.Errorf("a held route is not degraded: %+v", r)
			}
		})
	}
}

// TestDecideFloorListener: a listener that does not answer at a VIP's
// address is never held (only a VIP not truly dead is).
func TestDecideFloorListener(t *testing.T) {
	cfg := testConfig()
	cfg.BGP.MinAnnouncing = 1
	a := netip.MustParseAddr("192.0.2.80")
	cfg.VIPs = append(cfg.VIPs, configs.VIP{Name: "v80", Addr: a})
	p := netip.PrefixFrom(a, 32)
	partial := hub.Verdict{Name: "v80", Addr: a, Partial: true, Reason: "not serving: tcp/53"}
	deaf := hub.Verdict{Name: "192.0.2.80:53", Addr: a, Reason: "not answering"}
	ok := serving("192.0.2.80:5353", "192.0.2.80")
	routes, _ := Decide(Input{Config: cfg, VIPs: []hub.Verdict{partial}, Listeners: []hub.Verdict{deaf, ok}, Fleet: &FleetView{Read: true}, Announced: []netip.Prefix{p}})
	i := slices.IndexFunc(routes, func(r Route) bool { return r.Prefix == p })
	if i < 0 || routes[i].Announce || routes[i].Held {
		t.Fatalf("a partial VIP sharing its address with a deaf listener: %+v", routes)
	}
	routes, _ = Decide(Input{Config: cfg, VIPs: []hub.Verdict{partial}, Listeners: []hub.Verdict{serving("192.0.2.80:53", "192.0.2.80"), ok}, Fleet: &FleetView{Read: true}, Announced: []netip.Prefix{p}})
	if i := slices.IndexFunc(routes, func(r Route) bool { return r.Prefix == p }); i < 0 || !routes[i].Held {
		t.Fatalf("a partial VIP sharing its address with answering listeners, alone in the fleet, not held: %+v", routes)
	}
}

// TestDecideStopping: lbdnsd stopping with drain_on_stop marks every
// announced prefix GRACEFUL_SHUTDOWN for drain_on_stop_delay, then
// withdraws it; with a host drain in force too, the earlier withdrawal
// wins; the floor does not keep a stopping host's routes.
func TestDecideStopping(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	p4 := netip.MustParsePrefix("192.0.2.53/32")
	cfg := testConfig()
	cfg.BGP.DrainOnStop, cfg.BGP.DrainOnStopDelay.Duration = true, 5*time.Second
	cfg.BGP.MinAnnouncing = 1
	vips := []hub.Verdict{serving("v4", "192.0.2.53")}
	route := func(in Input) (Route, time.Time) {
		t.Helper()
		in.Config, in.VIPs = cfg, vips
		routes, next := Decide(in)
		i := slices.IndexFunc(routes, func(r Route) bool { return r.Prefix == p4 })
		if i < 0 {
			t.Fatalf("no route of %s", p4)
		}
		return routes[i], next
	}
	r, next := route(Input{Stopping: t0, Now: t0.Add(4 * time.Second)})
	if !r.Announce || !r.Draining || !slices.Contains(r.Communities, configs.GracefulShutdown) || !next.Equal(t0.Add(5*time.Second)) ||
		!strings.Contains(r.Reason, "GRACEFUL_SHUTDOWN until 2026-01-02T03:00:05Z (lbdnsd stopping (drain_on_stop))") {
		t.Errorf("stopping, before the delay: %+v next %v", r, next)
	}
	r, _ = route(Input{Stopping: t0, Now: t0.Add(5 * time.Second), Fleet: &FleetView{Read: true}, Announced: []netip.Prefix{p4}})
	if r.Announce || !strings.Contains(r.Reason, "withdrawn: lbdnsd stopping since 2026-01-02T03:00:00Z (drain_on_stop), drain_on_stop_delay 5s over") {
		t.Errorf("stopping, after the delay: %+v", r)
	}
	// A host drain that began 28 s ago withdraws in 2 s: before the stop's.
	drain := &intent.HostDrain{Set: t0.Add(-28 * time.Second), By: "uid 0"}
	r, next = route(Input{Stopping: t0, Drain: drain, Now: t0})
	if !r.Draining || !next.Equal(t0.Add(2*time.Second)) || !strings.Contains(r.Reason, "(by uid 0)") {
		t.Errorf("stopping while drained: %+v next %v", r, next)
	}
	// A host drain that just began withdraws after the stop's.
	r, next = route(Input{Stopping: t0, Drain: &intent.HostDrain{Set: t0, By: "uid 0"}, Now: t0})
	if !r.Draining || !next.Equal(t0.Add(5*time.Second)) || !strings.Contains(r.Reason, "lbdnsd stopping") {
		t.Errorf("stopping just after a drain: %+v next %v", r, next)
	}
}

// TestAnnouncements grades the announced routes as a heartbeat says
// them, and ViewOf counts the others only.
func TestAnnouncements(t *testing.T) {
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	routes := []Route{
		{Prefix: p("192.0.2.1/32"), Announce: true},
		{Prefix: p("192.0.2.2/32"), Announce: true, Degraded: true},
		{Prefix: p("192.0.2.3/32"), Announce: true, Degraded: true, Held: true},
		{Prefix: p("192.0.2.4/32"), Announce: true, Held: true, Draining: true},
		{Prefix: p("192.0.2.5/32")},
	}
	want := []fleet.Announcement{{Prefix: p("192.0.2.1/32"), Grade: fleet.GradeUp}, {Prefix: p("192.0.2.2/32"), Grade: fleet.GradeDegraded},
		{Prefix: p("192.0.2.3/32"), Grade: fleet.GradeHeld}, {Prefix: p("192.0.2.4/32"), Grade: fleet.GradeDraining}}
	if got := Announcements(routes); !slices.Equal(got, want) {
		t.Errorf("Announcements = %v, want %v", got, want)
	}
	nodes := []fleet.Node{
		{Heartbeat: fleet.Heartbeat{Name: "lb1", Announced: want}},
		{Heartbeat: fleet.Heartbeat{Name: "lb2", Announced: want[:1]}},
	}
	v := ViewOf(nodes, "lb1")
	if !v.Read || len(v.Announcers) != 1 || !slices.Equal(v.Announcers[p("192.0.2.1/32")], []string{"lb2"}) {
		t.Errorf("ViewOf = %+v", v)
	}
}

// TestAnnouncerFloor follows the fleet's view: a partial VIP is held
// while no other host announces it, and withdrawn once another host is
// seen announcing it; the heartbeat's facts follow (held, then none).
func TestAnnouncerFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hub.New(func() hub.Facts { return nil })
		cfg := testConfig()
		cfg.Fleet = &configs.Fleet{Name: "lb1"}
		cfg.BGP.MinAnnouncing = 1
		h.Config.Publish(cfg)
		view := hub.NewValue[FleetView]()
		view.Publish(FleetView{Read: true})
		spk := newFake()
		a := New(Options{Hub: h, Speaker: spk, Fleet: view})
		cancel, done := run(a)
		p4 := netip.MustParsePrefix("192.0.2.53/32")
		h.VIPs.Publish([]hub.Verdict{serving("v4", "192.0.2.53")})
		synctest.Wait()
		if b, _ := a.Beat().Load(); !slices.Equal(b.Announced, []fleet.Announcement{{Prefix: p4, Grade: fleet.GradeUp}}) {
			t.Fatalf("serving: beat %+v", b)
		}
		h.VIPs.Publish([]hub.Verdict{{Name: "v4", Addr: p4.Addr(), Partial: true, Reason: "not serving: tcp/53"}})
		synctest.Wait()
		if paths, _, _ := spk.state(); len(paths) != 1 || paths[0].MED != 1000 {
			t.Fatalf("partial, alone: paths %v (want held, MED 1000)", paths)
		}
		if b, _ := a.Beat().Load(); !slices.Equal(b.Announced, []fleet.Announcement{{Prefix: p4, Grade: fleet.GradeHeld}}) {
			t.Fatalf("held: beat %+v", b)
		}
		view.Publish(FleetView{Read: true, Announcers: map[netip.Prefix][]string{p4: {"lb2"}}})
		synctest.Wait()
		if paths, _, _ := spk.state(); len(paths) != 0 {
			t.Fatalf("partial, lb2 announces: paths %v (want withdrawn)", paths)
		}
		if b, _ := a.Beat().Load(); len(b.Announced) != 0 || b.Drained {
			t.Fatalf("withdrawn: beat %+v", b)
		}
		cancel()
		<-done
	})
}

// TestAnnouncerDrainOnStop: with drain_on_stop, stopping marks the
// routes GRACEFUL_SHUTDOWN and withdraws them drain_on_stop_delay later,
// then closes the speaker; without it, stopping closes at once.
func TestAnnouncerDrainOnStop(t *testing.T) {
	for _, on := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			h := hub.New(func() hub.Facts { return nil })
			cfg := testConfig()
			cfg.BGP.DrainOnStop, cfg.BGP.DrainOnStopDelay.Duration = on, 5*time.Second
			h.Config.Publish(cfg)
			spk := newFake()
			var changes []Change
			a := New(Options{Hub: h, Speaker: spk, OnChange: func(c Change) { changes = append(changes, c) }})
			cancel, done := run(a)
			h.VIPs.Publish([]hub.Verdict{serving("v4", "192.0.2.53")})
			synctest.Wait()
			start := time.Now()
			cancel()
			synctest.Wait()
			if !on {
				<-done
				if paths, _, closed := spk.state(); len(paths) != 0 || closed != 1 || time.Since(start) != 0 {
					t.Fatalf("without drain_on_stop: paths %v closed %d after %v", paths, closed, time.Since(start))
				}
				return
			}
			paths, _, closed := spk.state()
			if len(paths) != 1 || !slices.Contains(paths[0].Communities, configs.GracefulShutdown) || closed != 0 {
				t.Fatalf("stopping: paths %v closed %d (want marked GRACEFUL_SHUTDOWN, open)", paths, closed)
			}
			if b, _ := a.Beat().Load(); !b.Drained || len(b.Announced) != 1 || b.Announced[0].Grade != fleet.GradeDraining {
				t.Errorf("stopping: beat %+v", b)
			}
			<-done
			if paths, _, closed := spk.state(); len(paths) != 0 || closed != 1 || time.Since(start) != 5*time.Second {
				t.Fatalf("stopped: paths %v closed %d after %v (want withdrawn, closed, after 5s)", paths, closed, time.Since(start))
			}
			var text []string
			for _, c := range changes {
				text = append(text, c.Message)
			}
			if j := strings.Join(text, "\n"); !strings.Contains(j, "lbdnsd stopping: 1 routes marked GRACEFUL_SHUTDOWN for 5s") || !strings.Contains(j, "withdrawn: lbdnsd stopping since") {
				t.Errorf("changes:\n%s", j)
			}
		})
	}
}
