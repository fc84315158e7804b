package responder

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/monitor"
	"lbdns/testkit/poll"
)

// emergencyConfig serves zone g.test. with the ECS name www (pool p: m1
// 192.0.2.1, m2 192.0.2.2; static set 198.51.100.9).
func emergencyConfig(t *testing.T, dir string) *configs.Config {
	t.Helper()
	doc := fmt.Sprintf(`[daemon]
state_dir = %q

[check.c.dns]
qname = "example.com"

[[gslb.pool]]
name = "p"
monitors = ["c"]
[[gslb.pool.member]]
name = "m1"
address = "192.0.2.1"
[[gslb.pool.member]]
name = "m2"
address = "192.0.2.2"

[[gslb.zone]]
name = "g.test"
ns = ["ns1.g.test."]

[[gslb.name]]
name = "www.g.test"
ecs = true
static = ["198.51.100.9"]
[[gslb.name.policy]]
pool = "p"

[gslb.server]
listen = ["127.0.0.1:0"]
`, dir)
	cfg, err := configs.Parse([]byte(doc), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// answerOf asks addr for www.g.test. A with an ECS option and returns
// the addresses, the TTL and the ECS scope.
func answerOf(t *testing.T, addr string) (addrs []string, ttl uint32, scope uint8) {
	t.Helper()
	r := exchange(t, addr, "udp", withECS(query("www.g.test.", dns.TypeA, 1232), []byte{0, 1, 24, 0, 10, 1, 2}))
	for _, rr := range r.Answer {
		addrs = append(addrs, rr.(*dns.A).A.String())
		ttl = rr.Header().Ttl
	}
	slices.Sort(addrs)
	e := ecsOf(r)
	if e == nil {
		t.Fatalf("no ECS option in the reply: %v", r)
	}
	scope = e.SourceScope
	return addrs, ttl, scope
}

// TestResponderEmergency: Refresh applies the intent at once on every
// listener (static set, scope 0, raised TTL, metrics), a member's state
// change under the switch changes nothing, and switching back gives the
// dynamic answers; Run rebuilds on an EventGSLB.
func TestResponderEmergency(t *testing.T) {
	cfg := emergencyConfig(t, t.TempDir())
	var mu sync.Mutex
	var st intent.State
	statuses := map[monitor.Key]monitor.TargetStatus{}
	setState := func(member string, s health.State) {
		k := gslb.MonitorKey("p", member, "c")
		mu.Lock()
		statuses[k] = monitor.TargetStatus{Key: k, Health: health.Status{State: s}}
		mu.Unlock()
	}
	setState("m1", health.Up)
	setState("m2", health.Down)
	reg := prometheus.NewRegistry()
	h := hub.New(func() hub.Facts {
		mu.Lock()
		defer mu.Unlock()
		out := hub.Facts{}
		for k, v := range statuses {
			out[k] = v
		}
		return out
	})
	h.Config.Publish(cfg)
	r := NewResponder(ResponderOptions{
		Hub:        h,
		Intent:     func() intent.State { mu.Lock(); defer mu.Unlock(); return st.Clone() },
		Registerer: reg,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, 5*time.Second, "responder listening", poll.True(func() bool { return len(r.Addrs()) == 1 }))
	addr := r.Addrs()[0].String()

	if a, ttl, scope := answerOf(t, addr); !slices.Equal(a, []string{"192.0.2.1"}) || ttl != 30 || scope != 0 {
		t.Fatalf("dynamic: %v ttl %d scope %d", a, ttl, scope)
	}
	mu.Lock()
	st = intent.State{Emergencies: []intent.Emergency{{Name: "www.g.test.", Mode: intent.ModeStatic}}, TTLRaises: []intent.TTLRaise{{Zone: "g.test.", Seconds: 600}}}
	mu.Unlock()
	r.Refresh()
	if a, ttl, scope := answerOf(t, addr); !slices.Equal(a, []string{"198.51.100.9"}) || ttl != 600 || scope != 0 {
		t.Errorf("off: %v ttl %d scope %d, want the static set, ttl 600, scope 0", a, ttl, scope)
	}
	if v := metricValue(t, reg, "lbdns_gslb_emergency", "www.g.test."); v != 1 {
		t.Errorf("lbdns_gslb_emergency{www} = %v", v)
	}
	if v := metricValue(t, reg, "lbdns_gslb_ttl_raised_seconds", "www.g.test."); v != 600 {
		t.Errorf("lbdns_gslb_ttl_raised_seconds{www} = %v", v)
	}
	if v := metricValue(t, reg, "lbdns_gslb_emergency_answers_total", "www.g.test."); v != 1 {
		t.Errorf("lbdns_gslb_emergency_answers_total{www} = %v", v)
	}
	// A member dying while off changes nothing.
	setState("m1", health.Down)
	h.Facts.Touch()
	time.Sleep(50 * time.Millisecond)
	if a, _, _ := answerOf(t, addr); !slices.Equal(a, []string{"198.51.100.9"}) {
		t.Errorf("off, m1 down: %v", a)
	}
	// Back on through a new intent version (Run): dynamic again (m1 down, m2
	// down: fail-open to both).
	mu.Lock()
	st = intent.State{}
	mu.Unlock()
	h.Intent.Publish(hub.Intent{Revision: 2})
	poll.Until(t, 5*time.Second, "dynamic answers again", func() (bool, string) {
		a, ttl, _ := answerOf(t, addr)
		return slices.Equal(a, []string{"192.0.2.1", "192.0.2.2"}) && ttl == 30, fmt.Sprint(a, ttl)
	})
	if v := metricValue(t, reg, "lbdns_gslb_emergency", "www.g.test."); v != 0 {
		t.Errorf("lbdns_gslb_emergency{www} = %v after on", v)
	}
}
