package responder

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/internal/lab/vendors"
	"lbdns/monitor"
	"lbdns/testkit/poll"
)

// edeVendorConfig serves g.test: www (fail-open last resort, the
// default), sf (SERVFAIL last resort) and st (static last resort), all of
// pool p.
func edeVendorConfig(t *testing.T, dir string) *configs.Config {
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
static = ["198.51.100.9"]
[[gslb.name.policy]]
pool = "p"

[[gslb.name]]
name = "sf.g.test"
last_resort = "servfail"
[[gslb.name.policy]]
pool = "p"

[[gslb.name]]
name = "st.g.test"
last_resort = "static"
static = ["198.51.100.7"]
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

// dig runs Debian's dig (bind9-dnsutils) with args and returns its output.
func dig(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("dig")
	if err != nil {
		vendors.Require(t, vendors.BIND) // skip or fail as for the products
		t.Fatalf("dig not found (install bind9-dnsutils): %v", err)
	}
	out, err := exec.Command(path, append([]string{"+tries=1", "+time=3"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// digEDE is the status and the EDE lines of dig's output.
func digEDE(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if _, st, ok := strings.Cut(l, "status: "); ok {
			keep = append(keep, strings.TrimSuffix(st[:strings.IndexByte(st+",", ',')], ","))
		}
		if strings.HasPrefix(l, "; EDE: ") {
			keep = append(keep, strings.TrimPrefix(l, "; "))
		}
	}
	return strings.Join(keep, " | ")
}

// TestEDEThroughResolvers: dig (bind9-dnsutils) straight at the
// responder prints each non-normal answer's Extended DNS Error, with
// its EDNS on by default and with an EDE option of its own in the query
// (+ednsopt=15:0000; one of no bytes is malformed: FORMERR), and none
// without EDNS or on a normal answer. Then what
// the resolver products from Debian's packages do with it, forwarding
// to the responder (Unbound with ede: yes, log-servfail: yes,
// val-log-level: 2): Unbound, BIND, Knot Resolver and PowerDNS Recursor
// give their clients the same rcode and addresses without the
// responder's EDE (and add none of their own); dnsmasq passes the
// option on as it came. Unbound's log names the SERVFAIL and REFUSED
// it got from the responder, not the EDE's text.
func TestEDEThroughResolvers(t *testing.T) {
	cfg := edeVendorConfig(t, t.TempDir())
	var mu sync.Mutex
	var st intent.State
	up := health.Up
	h := hub.New(func() hub.Facts {
		mu.Lock()
		defer mu.Unlock()
		out := hub.Facts{}
		for _, m := range []string{"m1", "m2"} {
			k := gslb.MonitorKey("p", m, "c")
			out[k] = monitor.TargetStatus{Key: k, Health: health.Status{State: up}}
		}
		return out
	})
	h.Config.Publish(cfg)
	r := NewResponder(ResponderOptions{Hub: h, Intent: func() intent.State { mu.Lock(); defer mu.Unlock(); return st.Clone() }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, 5*time.Second, "responder listening", poll.True(func() bool { return len(r.Addrs()) == 1 }))
	addr := r.Addrs()[0]
	at := func(a netip.AddrPort, args ...string) string {
		return digEDE(dig(t, append([]string{"@" + a.Addr().String(), "-p", fmt.Sprint(a.Port())}, args...)...))
	}
	poll.Until(t, 5*time.Second, "the normal answers", func() (bool, string) {
		m := exchange(t, addr.String(), "udp", query("www.g.test.", dns.TypeA, 1232))
		return len(m.Answer) == 1, m.String()
	})
	for _, name := range []string{"www.g.test", "sf.g.test", "st.g.test"} {
		if got := at(addr, name, "A"); got != "NOERROR" {
			t.Errorf("dig %s, its member up: %q, want NOERROR and no EDE", name, got)
		}
	}

	// Every member down: each name on its last resort.
	mu.Lock()
	up = health.Down
	mu.Unlock()
	h.Facts.Touch()
	poll.Until(t, 5*time.Second, "the last resort", func() (bool, string) {
		m := exchange(t, addr.String(), "udp", query("www.g.test.", dns.TypeA, 1232))
		return edeOfReply(m) != nil, m.String()
	})
	cases := []struct{ name, direct, resolved string }{
		{"www.g.test", "NOERROR | EDE: 0 (Other): (" + edeLastResortFailOpen + ")", "NOERROR"},
		{"sf.g.test", "SERVFAIL | EDE: 0 (Other): (" + edeLastResortServfail + ")", "SERVFAIL"},
		{"st.g.test", "NOERROR | EDE: 0 (Other): (" + edeLastResortStatic + ")", "NOERROR"},
		{"www.example", "REFUSED | EDE: 20 (Not Authoritative): (" + edeNotAuthoritative + ")", "SERVFAIL"},
	}
	for _, c := range cases {
		if got := at(addr, c.name, "A"); got != c.direct {
			t.Errorf("dig %s: %q, want %q", c.name, got, c.direct)
		}
		if got := at(addr, "+ednsopt=15:0000", c.name, "A"); got != c.direct {
			t.Errorf("dig +ednsopt=15:0000 %s: %q, want %q", c.name, got, c.direct)
		}
		// An EDE option of no bytes lacks its INFO-CODE (RFC 8914 2):
		// malformed, FORMERR, as BIND 9.18 answers it.
		if got := at(addr, "+ednsopt=15", c.name, "A"); got != "FORMERR" {
			t.Errorf("dig +ednsopt=15 %s: %q, want FORMERR", c.name, got)
		}
		if got := at(addr, "+noedns", c.name, "A"); strings.Contains(got, "EDE") {
			t.Errorf("dig +noedns %s: %q, want no EDE", c.name, got)
		}
	}

	for _, v := range vendors.All() {
		t.Run(string(v), func(t *testing.T) {
			p := vendors.StartWith(t, v, addr, vendors.Options{EDE: true})
			for _, c := range cases {
				want := c.resolved
				if v == vendors.Dnsmasq {
					want = c.direct // a forwarder that relays the packet
				}
				if got := at(p.Addr, c.name, "A"); got != want {
					t.Errorf("dig %s through %s: %q, want %q", c.name, v, got, want)
				}
			}
			// The addresses are the last resort's all the same.
			if m := exchange(t, p.Addr.String(), "udp", query("www.g.test.", dns.TypeA, 1232)); len(m.Answer) != 2 {
				t.Errorf("www through %s: %v, want both members (fail-open)", v, m)
			}
			if v != vendors.Unbound {
				return
			}
			poll.Until(t, 5*time.Second, "unbound to log the SERVFAILs", func() (bool, string) {
				log := p.Log()
				return strings.Contains(log, "SERVFAIL <sf.g.test. A IN>: all the configured stub or forward servers failed, at zone . from 127.0.0.1 got SERVFAIL") &&
					strings.Contains(log, "SERVFAIL <www.example. A IN>: all the configured stub or forward servers failed, at zone . from 127.0.0.1 got REFUSED"), log
			})
			if log := p.Log(); strings.Contains(log, "lbdns:") {
				t.Errorf("unbound's log has the EDE's text:\n%s", log)
			}
		})
	}

	// The operator's switches, straight at the responder.
	mu.Lock()
	up, st = health.Up, intent.State{TTLRaises: []intent.TTLRaise{{Zone: "g.test.", Seconds: 600}}}
	mu.Unlock()
	h.Facts.Touch()
	poll.Until(t, 5*time.Second, "the TTL raise", func() (bool, string) {
		got := at(addr, "www.g.test", "A")
		return got == "NOERROR | EDE: 0 (Other): ("+edeRaised+")", got
	})
	mu.Lock()
	st = intent.State{Emergencies: []intent.Emergency{{Name: "www.g.test.", Mode: intent.ModeStatic}}}
	mu.Unlock()
	h.Intent.Publish(hub.Intent{Revision: 2})
	poll.Until(t, 5*time.Second, "the emergency switch", func() (bool, string) {
		got := at(addr, "www.g.test", "A")
		return got == "NOERROR | EDE: 0 (Other): ("+edeEmergency+")", got
	})
}
