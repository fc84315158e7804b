package responder

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/gslb"
	"lbdns/health"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/monitor"
	"lbdns/testkit/poll"
)

// edeOfReply returns the Extended DNS Error of r, nil when none.
func edeOfReply(r *dns.Msg) *dns.EDNS0_EDE {
	if o := r.IsEdns0(); o != nil {
		for _, x := range o.Option {
			if e, ok := x.(*dns.EDNS0_EDE); ok {
				return e
			}
		}
	}
	return nil
}

// TestExtendedErrors: every answer that is not the normal one carries an
// Extended DNS Error (RFC 8914) naming why, over UDP and TCP, with and
// without ECS (the option beside the Client Subnet one): a last resort
// (fail-open), the emergency switch, a TTL raise, a query outside the
// zones (Not Authoritative); a normal answer, NXDOMAIN and a query
// without EDNS carry none.
func TestExtendedErrors(t *testing.T) {
	cfg := emergencyConfig(t, t.TempDir())
	var mu sync.Mutex
	var st intent.State
	up := health.Up
	h := hub.New(func() hub.Facts {
		mu.Lock()
		defer mu.Unlock()
		k := gslb.MonitorKey("p", "m1", "c")
		return hub.Facts{k: monitor.TargetStatus{Key: k, Health: health.Status{State: up}}}
	})
	h.Config.Publish(cfg)
	r := NewResponder(ResponderOptions{Hub: h, Intent: func() intent.State { mu.Lock(); defer mu.Unlock(); return st.Clone() }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, 5*time.Second, "responder listening", poll.True(func() bool { return len(r.Addrs()) == 1 }))
	addr := r.Addrs()[0].String()

	ask := func(name string, edns, ecs bool, net string) *dns.Msg {
		t.Helper()
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		if edns {
			q.SetEdns0(1232, false)
			if ecs {
				q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: []byte{10, 1, 2, 0}})
			}
		}
		return exchange(t, addr, net, q)
	}
	want := func(what string, m *dns.Msg, code uint16, text string) {
		t.Helper()
		e := edeOfReply(m)
		switch {
		case text == "" && e != nil:
			t.Errorf("%s: EDE %d %q on a normal answer", what, e.InfoCode, e.ExtraText)
		case text != "" && (e == nil || e.InfoCode != code || e.ExtraText != text):
			t.Errorf("%s: EDE %+v, want %d %q (reply %v)", what, e, code, text, m)
		}
	}
	for _, net := range []string{"udp", "tcp"} {
		for _, ecs := range []bool{false, true} {
			want(net+" normal", ask("www.g.test.", true, ecs, net), 0, "")
		}
		want(net+" NXDOMAIN", ask("nope.g.test.", true, false, net), 0, "")
		want(net+" outside the zones", ask("www.example.", true, false, net), dns.ExtendedErrorCodeNotAuthoritative, edeNotAuthoritative)
	}
	if m := ask("www.example.", false, false, "udp"); edeOfReply(m) != nil || m.IsEdns0() != nil {
		t.Errorf("a query without EDNS got an OPT: %v", m)
	}

	mu.Lock()
	up = health.Down
	mu.Unlock()
	h.Facts.Touch()
	poll.Until(t, 5*time.Second, "the last resort", func() (bool, string) {
		m := ask("www.g.test.", true, true, "udp")
		return edeOfReply(m) != nil, m.String()
	})
	for _, net := range []string{"udp", "tcp"} {
		for _, ecs := range []bool{false, true} {
			m := ask("www.g.test.", true, ecs, net)
			want(net+" last resort", m, dns.ExtendedErrorCodeOther, edeLastResortFailOpen)
			if ecs && ecsOf(m) == nil {
				t.Errorf("%s last resort with ECS: the Client Subnet option is gone: %v", net, m)
			}
		}
	}
	if m := ask("www.g.test.", false, false, "udp"); m.IsEdns0() != nil || len(m.Answer) != 2 {
		t.Errorf("last resort without EDNS: %v", m)
	}

	mu.Lock()
	up, st = health.Up, intent.State{TTLRaises: []intent.TTLRaise{{Zone: "g.test.", Seconds: 600}}}
	mu.Unlock()
	h.Facts.Touch()
	poll.Until(t, 5*time.Second, "the TTL raise", func() (bool, string) {
		m := ask("www.g.test.", true, false, "udp")
		return len(m.Answer) == 1 && m.Answer[0].Header().Ttl == 600, m.String()
	})
	want("TTL raised", ask("www.g.test.", true, false, "udp"), dns.ExtendedErrorCodeOther, edeRaised)

	mu.Lock()
	st = intent.State{Emergencies: []intent.Emergency{{Name: "www.g.test.", Mode: intent.ModeStatic}}}
	mu.Unlock()
	h.Intent.Publish(hub.Intent{Revision: 2})
	poll.Until(t, 5*time.Second, "the emergency switch", func() (bool, string) {
		m := ask("www.g.test.", true, false, "udp")
		return len(m.Answer) == 1 && m.Answer[0].(*dns.A).A.String() == "198.51.100.9", m.String()
	})
	want("emergency", ask("www.g.test.", true, true, "tcp"), dns.ExtendedErrorCodeOther, edeEmergency)
}
