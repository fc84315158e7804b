package responder

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/health"
	"lbdns/monitor"
)

// explainConfig is a zone gslb.test with a dynamic name www (ECS on):
// clients of 198.51.100.0/24 (region east) get pool east, the others
// pool west; a static record and the whoami name.
func explainConfig(t *testing.T, off bool) *configs.Config {
	t.Helper()
	cfg, err := configs.Parse([]byte(explainDoc(t, off)), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// explainDoc is the document of explainConfig.
func explainDoc(t *testing.T, off bool) string {
	doc := fmt.Sprintf(`[daemon]
state_dir = %q

[check.c.dns]
qname = "example.com"

[gslb]
policy_order = ["region", "global"]
whoami = "whoami.gslb.test"

[[gslb.zone]]
name = "gslb.test"
ns = ["ns1.gslb.test."]

[[gslb.zone.record]]
name = "static"
type = "A"
value = "192.0.2.80"

[[gslb.name]]
name = "www.gslb.test"
ecs = true

[[gslb.name.policy]]
match = { region = "east" }
pool = "east"

[[gslb.name.policy]]
pool = "west"

[[gslb.pool]]
name = "east"
monitors = ["c"]

[[gslb.pool.member]]
name = "e1"
address = "192.0.2.1"

[[gslb.pool]]
name = "west"
monitors = ["c"]

[[gslb.pool.member]]
name = "w1"
address = "192.0.2.2"

[[gslb.topology.net]]
prefix = "198.51.100.0/24"
labels = { region = "east" }
`, t.TempDir())
	if !off {
		doc += "\n[gslb.server]\nlisten = [\"127.0.0.1:0\"]\n"
	}
	return doc
}

// states are the monitor statuses of e1 and w1.
func states(e1, w1 health.State) map[monitor.Key]monitor.TargetStatus {
	out := map[monitor.Key]monitor.TargetStatus{}
	for _, m := range []struct {
		pool, member string
		st           health.State
	}{{"east", "e1", e1}, {"west", "w1", w1}} {
		k := gslb.MonitorKey(m.pool, m.member, "c")
		out[k] = monitor.TargetStatus{Key: k, Health: health.Status{State: m.st}}
	}
	return out
}

// TestResponderExplain: explain answers as the wire does (same answer,
// same ECS scope) and says why: the location, each policy tried, the
// pools with their members' states, the choice.
func TestResponderExplain(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	r := NewResponder(ResponderOptions{Now: func() time.Time { return clock }})
	defer r.Stop(context.Background())
	ctx := context.Background()

	if _, err := r.Explain(ctx, control.GSLBExplainRequest{Name: "www.gslb.test"}); kind(err) != control.Unavailable {
		t.Errorf("before the first update: %v, want Unavailable", err)
	}
	cfg := explainConfig(t, false)
	if err := r.Update(cfg, gslb.Evaluate(cfg, states(health.Up, health.Up), clock)); err != nil {
		t.Fatal(err)
	}
	addr := r.Addrs()[0].String()

	// A client of region east by ECS: pool east.
	rep, err := r.Explain(ctx, control.GSLBExplainRequest{Name: "WWW.gslb.test", ECS: "198.51.100.7", Client: "10.9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	wire := exchange(t, addr, "udp", withECS(query("www.gslb.test.", dns.TypeA, 1232), []byte{0, 1, 32, 0, 198, 51, 100, 7}))
	if e := ecsOf(wire); e == nil || int(e.SourceScope) != rep.Scope || len(wire.Answer) != 1 || wire.Answer[0].String() != rep.Answer[0] {
		t.Errorf("explain %v scope %d; the wire answers %v with %v", rep.Answer, rep.Scope, wire.Answer, e)
	}
	if rep.Name != "www.gslb.test." || rep.Type != "A" || rep.Rcode != "NOERROR" || rep.Serial != r.Serial() || rep.GSLBName != "www.gslb.test." {
		t.Errorf("question %s %s rcode %s serial %d (want %d) name %q", rep.Name, rep.Type, rep.Rcode, rep.Serial, r.Serial(), rep.GSLBName)
	}
	if rep.Client != "198.51.100.7" || rep.ClientFrom != "ecs" || rep.ECS != "198.51.100.7/32" {
		t.Errorf("client %s from %s ecs %s, want 198.51.100.7 from ecs, 198.51.100.7/32", rep.Client, rep.ClientFrom, rep.ECS)
	}
	if l := rep.Location; l.Labels["region"] != "east" || l.Prefix != "198.51.100.0/24" || l.Scope != 24 || rep.Scope != 24 {
		t.Errorf("location %+v, reply scope %d; want region east from 198.51.100.0/24, scope 24", l, rep.Scope)
	}
	if len(rep.Policies) != 1 || !rep.Policies[0].Matched || !rep.Policies[0].Answered || rep.Policies[0].Match["region"] != "east" {
		t.Fatalf("policies %+v, want east matched and answering (global not tried)", rep.Policies)
	}
	if p := rep.Policies[0].Pools; len(p) != 1 || p[0].Name != "east" || p[0].Algorithm != "rr" || p[0].Healthy != 1 ||
		!slices.Equal(p[0].Members, []control.GSLBExplainMember{{Name: "e1", Address: "192.0.2.1", State: "up", Weight: 100, Chosen: true}}) {
		t.Errorf("pools %+v, want east with e1 up, chosen", p)
	}
	if !slices.Equal(rep.Addresses, []string{"192.0.2.1"}) || rep.TTL != 30 || rep.LastResort != "" {
		t.Errorf("addresses %v ttl %d last resort %q, want 192.0.2.1, 30, none", rep.Addresses, rep.TTL, rep.LastResort)
	}

	// Its pool down: the next policy (global) answers, and says why.
	_ = r.Update(cfg, gslb.Evaluate(cfg, states(health.Down, health.Up), clock))
	rep, err = r.Explain(ctx, control.GSLBExplainRequest{Name: "www.gslb.test", ECS: "198.51.100.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Policies) != 2 || rep.Policies[0].Answered || !rep.Policies[1].Answered ||
		rep.Policies[0].Pools[0].Healthy != 0 || rep.Policies[0].Pools[0].Members[0].State != "down" ||
		!slices.Equal(rep.Addresses, []string{"192.0.2.2"}) {
		t.Errorf("east down: %+v, want east tried (e1 down), global answering 192.0.2.2", rep)
	}

	// No ECS: the source locates (no entry: only global matches); the
	// reply carries no scope.
	rep, err = r.Explain(ctx, control.GSLBExplainRequest{Name: "www.gslb.test", Client: "10.0.0.1", Type: "aaaa"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Type != "AAAA" || rep.Rcode != "NOERROR" || len(rep.Answer) != 0 || len(rep.Authority) != 1 {
		t.Errorf("AAAA without members of the family: %+v, want NODATA with the SOA", rep)
	}
	rep, err = r.Explain(ctx, control.GSLBExplainRequest{Name: "www.gslb.test", Client: "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Client != "10.0.0.1" || rep.ClientFrom != "source" || rep.Scope != 0 || rep.Policies[0].Matched || !rep.Policies[1].Answered {
		t.Errorf("by source: %+v", rep)
	}

	// Zone data and whoami explain too.
	rep, err = r.Explain(ctx, control.GSLBExplainRequest{Name: "static.gslb.test"})
	if err != nil || len(rep.Answer) != 1 || rep.GSLBName != "" || !slices.Equal(rep.Addresses, []string{"192.0.2.80"}) {
		t.Errorf("static: %+v, %v", rep, err)
	}
	rep, err = r.Explain(ctx, control.GSLBExplainRequest{Name: "whoami.gslb.test", Type: "TXT", Client: "192.0.2.53", ECS: "203.0.113.0/24"})
	if err != nil || len(rep.Answer) != 1 || rep.Scope != 24 {
		t.Errorf("whoami: %+v, %v", rep, err)
	}

	for _, tc := range []struct {
		req  control.GSLBExplainRequest
		kind control.Kind
		want string
	}{
		{control.GSLBExplainRequest{Name: "www.example.org"}, control.NotFound, "www.example.org. is in no GSLB zone (zones: gslb.test.)"},
		{control.GSLBExplainRequest{Name: "nope.gslb.test"}, control.NotFound, "no such name: nope.gslb.test. (the responder answers NXDOMAIN)"},
		{control.GSLBExplainRequest{Name: "www.gslb.test", Type: "BOGUS"}, control.Malformed, "type: want A, AAAA or another query type, not BOGUS"},
		{control.GSLBExplainRequest{Name: "www.gslb.test", Client: "1.2.3"}, control.Malformed, "client: want an IP address, not 1.2.3"},
		{control.GSLBExplainRequest{Name: "www.gslb.test", ECS: "1.2.3.4/33"}, control.Malformed, "ecs: want a prefix"},
	} {
		_, err := r.Explain(ctx, tc.req)
		var re *control.Error
		if !errors.As(err, &re) || re.Kind != tc.kind || !strings.Contains(re.Message, tc.want) {
			t.Errorf("Explain(%+v) = %v; want kind %d %q", tc.req, err, tc.kind, tc.want)
		}
	}

	// Off: a clear Unavailable.
	off := explainConfig(t, true)
	_ = r.Update(off, gslb.Evaluate(off, nil, clock))
	_, err = r.Explain(ctx, control.GSLBExplainRequest{Name: "www.gslb.test"})
	var re *control.Error
	if !errors.As(err, &re) || re.Kind != control.Unavailable || re.Message != "the GSLB responder is off (gslb.server.listen is empty)" {
		t.Errorf("off: %v", err)
	}
}

// kind is the kind of a *control.Error, 0 otherwise.
func kind(err error) control.Kind {
	var re *control.Error
	if errors.As(err, &re) {
		return re.Kind
	}
	return 0
}
