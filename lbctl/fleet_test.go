package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

// TestFleetStatus lists the nodes and marks the odd one out.
func TestFleetStatus(t *testing.T) {
	st := control.FleetStatus{On: true, Node: "lb1", Location: "dc1", Cluster: "c1", Heartbeat: true, Nodes: []control.FleetNode{
		{Name: "lb1", Location: "dc1", Cluster: "c1", ConfigHash: "aaaa", IntentRevision: 12, CurrentRevision: 12, Serial: 7, AgeSeconds: 1.2, Started: time.Unix(1700000000, 0)},
		{Name: "lb2", Location: "dc2", Cluster: "c1", ConfigHash: "aaaa", IntentRevision: 11, CurrentRevision: 12, Serial: 7, AgeSeconds: 3,
			Odd: []string{"intent revision 11 applied, 12 in force"}},
	}}
	f := startFake(t, map[string]reply{"GET /v1/fleet": {body: st}})
	r := lbctl(t, "-socket", f.socket, "fleet", "status")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"node lb1 (location dc1, cluster c1), heartbeat alive",
		"lb1   dc1       c1       1s   aaaa    12",
		"!  lb2   dc2       c1       3s   aaaa    11/12",
		"intent revision 11 applied, 12 in force",
		"1 of 2 nodes differ (marked !)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = lbctl(t, "-socket", f.socket, "-o", "json", "fleet", "status")
	var got control.FleetStatus
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Nodes) != 2 || got.Nodes[1].Odd == nil {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
}

// TestFleetStatusAlone: a daemon in no fleet says so.
func TestFleetStatusAlone(t *testing.T) {
	f := startFake(t, map[string]reply{"GET /v1/fleet": {body: control.FleetStatus{Nodes: []control.FleetNode{}}}})
	r := lbctl(t, "-socket", f.socket, "fleet", "status")
	if r.code != exitOK || !strings.Contains(r.stdout, "not in a fleet") {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	if r := lbctl(t, "-socket", f.socket, "fleet", "nodes"); r.code != exitUsage {
		t.Errorf("fleet nodes: exit %d, want usage", r.code)
	}
}

// TestStaleWriteSaysSo: an override another node's change made stale is
// refused (409): lbctl prints why and exits 1.
func TestStaleWriteSaysSo(t *testing.T) {
	msg := "the operator intent changed meanwhile (revision 4, now 5: 1 override, 1 emergency switch, 0 TTL raises); nothing was changed: check it and retry"
	f := startFake(t, map[string]reply{"POST /v1/overrides": {code: 409, body: control.ErrorReply{Error: msg}}})
	r := lbctl(t, "-socket", f.socket, "drain", "bind-1")
	if r.code != exitRefused || !strings.Contains(r.stderr, msg) {
		t.Fatalf("exit %d, stderr %q; want %d and the conflict", r.code, r.stderr, exitRefused)
	}
}

// TestFleetStatusVotes: the verdicts' source, loudly when they are the
// node's own probes, a withdrawn node and a drained one.
func TestFleetStatusVotes(t *testing.T) {
	st := control.FleetStatus{On: true, Node: "lb1", Location: "dc1", Heartbeat: true, Verdicts: "fleet", Probers: []string{"lb1", "lb2"},
		ProbersPerMember: 3, ProbedMembers: 40, Members: 60, Canaries: 2, VoteWrites: 41,
		Nodes: []control.FleetNode{{Name: "lb1", Location: "dc1"}, {Name: "lb2", Location: "dc2", Drained: true}, {Name: "lb3", Location: "dc3", Withdrawn: true}}}
	f := startFake(t, map[string]reply{"GET /v1/fleet": {body: st}})
	r := lbctl(t, "-socket", f.socket, "fleet", "status")
	for _, want := range []string{
		"GSLB verdicts: the fleet's (2 live probers: lb1 lb2; 3 per member)",
		"this node probes 40 of 60 GSLB members and 2 canaries; 41 vote writes",
		"votes withdrawn (canaries fail)",
		"host DRAINED (announcements going away)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	st.Verdicts, st.VerdictsWhy, st.Withdrawn = "own probes", "etcd has not answered for 12s (more than the lease TTL, 10s)", true
	f = startFake(t, map[string]reply{"GET /v1/fleet": {body: st}})
	r = lbctl(t, "-socket", f.socket, "fleet", "status")
	for _, want := range []string{
		"!! GSLB VERDICTS FROM THIS NODE'S OWN PROBES: etcd has not answered for 12s (more than the lease TTL, 10s)",
		"!! VOTES WITHDRAWN: most of this node's 2 canaries fail",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestFleetStatusCanaries: the canary this node advertises, the
// canaries it leaves out as its own, and every canary warning of the
// fleet view, loudly.
func TestFleetStatusCanaries(t *testing.T) {
	st := control.FleetStatus{On: true, Node: "lb1", Location: "dc1", Heartbeat: true, Verdicts: "fleet", Probers: []string{"lb1", "lb2"},
		Canaries: 0, CanaryAddress: "198.51.100.53:53", CanaryFrom: "the GSLB listen address 198.51.100.53:53", CanariesOwn: []string{"198.51.100.53:53"},
		CanaryWarnings: []string{"nodes lb1, lb2 advertise the same canary 198.51.100.53:53 (a shared or anycast address): none of them probes it",
			"this node (lb1) probes no canary beyond itself: it cannot tell it is cut off from the members"},
		Nodes: []control.FleetNode{{Name: "lb1", Location: "dc1", Canary: "198.51.100.53:53"}, {Name: "lb2", Location: "dc2", Canary: "198.51.100.53:53"}}}
	f := startFake(t, map[string]reply{"GET /v1/fleet": {body: st}})
	r := lbctl(t, "-socket", f.socket, "fleet", "status")
	for _, want := range []string{
		"this node's canary (probed by the others): 198.51.100.53:53, from the GSLB listen address 198.51.100.53:53",
		"canaries left out as this node itself: 198.51.100.53:53",
		"!! CANARIES: nodes lb1, lb2 advertise the same canary 198.51.100.53:53 (a shared or anycast address): none of them probes it",
		"!! CANARIES: this node (lb1) probes no canary beyond itself: it cannot tell it is cut off from the members",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	st.CanaryAddress, st.CanaryFrom, st.CanariesOwn, st.CanaryWarnings = "", "no GSLB listen address or status endpoint is on an address of this host's own: set [fleet] canary_address", nil, nil
	f = startFake(t, map[string]reply{"GET /v1/fleet": {body: st}})
	r = lbctl(t, "-socket", f.socket, "fleet", "status")
	if want := "!! THIS NODE ADVERTISES NO CANARY: no GSLB listen address or status endpoint is on an address of this host's own: set [fleet] canary_address"; !strings.Contains(r.stdout, want) {
		t.Errorf("output lacks %q:\n%s", want, r.stdout)
	}
}

// TestFleetStatusSections: a node whose configuration differs is shown
// with the tables it differs in, and the JSON keeps every node's
// per-table hashes.
func TestFleetStatusSections(t *testing.T) {
	sec := map[string]string{"gslb": "g1", "check.recursive": "c1"}
	st := control.FleetStatus{On: true, Node: "lb1", Location: "dc1", Heartbeat: true, Nodes: []control.FleetNode{
		{Name: "lb1", Location: "dc1", ConfigHash: "aaaa", ConfigSections: sec, Serial: 7},
		{Name: "lb2", Location: "dc2", ConfigHash: "aaaa", ConfigSections: sec, Serial: 7},
		{Name: "lb3", Location: "dc3", ConfigHash: "bbbb", ConfigSections: map[string]string{"gslb": "g2", "check.recursive": "c1"}, Serial: 7,
			Odd: []string{"configuration bbbb, most of its cluster run aaaa: differs in [gslb]"}},
	}}
	f := startFake(t, map[string]reply{"GET /v1/fleet": {body: st}})
	r := lbctl(t, "-socket", f.socket, "fleet", "status")
	for _, want := range []string{"configuration bbbb, most of its cluster run aaaa: differs in [gslb]", "1 of 3 nodes differ (marked !)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = lbctl(t, "-socket", f.socket, "-o", "json", "fleet", "status")
	var got control.FleetStatus
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Nodes) != 3 || got.Nodes[2].ConfigSections["gslb"] != "g2" {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
}
