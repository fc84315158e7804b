package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/fleet/etcdfleet"
	"lbdns/intent"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// fleetExtra is a [fleet] table: endpoints, name, cluster, CA, cert, key.
const fleetExtra = `
[fleet]
endpoints = [%s]
name = %q
location = "dc-%[2]s"
cluster = %q
prefix = "/lbdns-test/"
lease_ttl = "2s"
dial_timeout = "2s"
ca_file = %q
cert_file = %q
key_file = %q
`

// fleetConfig writes node name's configuration in a directory of its
// own, with more (TOML) appended.
func fleetConfig(t *testing.T, c *etcdtest.Cluster, cr etcdtest.Creds, name, cluster string, more ...string) string {
	t.Helper()
	return fleetConfigAt(t, c.Endpoints, cr, name, cluster, more...)
}

// fleetConfigAt is fleetConfig with the etcd endpoints endpoints.
func fleetConfigAt(t *testing.T, endpoints []string, cr etcdtest.Creds, name, cluster string, more ...string) string {
	t.Helper()
	eps := make([]string, len(endpoints))
	for i, e := range endpoints {
		eps[i] = fmt.Sprintf("%q", e)
	}
	return writeConfig(t, t.TempDir(), strings.Join(more, "")+fmt.Sprintf(fleetExtra, strings.Join(eps, ", "), name, cluster, cr.CAFile, cr.CertFile, cr.KeyFile))
}

// TestFleetSharedIntent runs three daemons on one etcd: an override set
// on one is in force on the other node of its cluster and not in the
// other cluster; lbctl fleet status (GET /v1/fleet) lists the three with
// the intent they applied; a node that stops leaves the fleet view.
func TestFleetSharedIntent(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	fp := &fakeProbe{}
	a := start(t, fleetConfig(t, c, cr, "a", "c1"), vip.NewMemClient(), fp)
	b := start(t, fleetConfig(t, c, cr, "b", "c1"), vip.NewMemClient(), fp)
	other := start(t, fleetConfig(t, c, cr, "c", "c2"), vip.NewMemClient(), fp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitDests(t, a.client, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303") // warm: the override is judged on facts

	rep, err := a.d.SetOverride(ctx, control.OverrideRequest{Action: control.ActionDisable, Resolver: "bind-1", Reason: "fleet test"}, "uid 0")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a: %s", rep.Message)
	poll.Until(t, 10*time.Second, "b to apply a's override", func() (bool, string) {
		in, _ := b.d.Hub().Intent.Load()
		return len(in.State.Overrides) == 1 && in.State.Overrides[0].Resolver == "bind-1", fmt.Sprintf("%+v", in)
	})
	if in, _ := other.d.Hub().Intent.Load(); len(in.State.Overrides) != 0 {
		t.Errorf("the other cluster's node applied %+v", in.State.Overrides)
	}

	fleetView := func() *control.FleetStatus {
		st, err := a.d.Fleet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	poll.Until(t, 15*time.Second, "three nodes, each with its intent applied", func() (bool, string) {
		st := fleetView()
		if !st.On || !st.Heartbeat || st.Error != "" || len(st.Nodes) != 3 {
			return false, fmt.Sprintf("%+v", st)
		}
		for _, n := range st.Nodes {
			if n.IntentRevision != n.CurrentRevision || n.ConfigHash == "" || len(n.Odd) != 0 {
				return false, fmt.Sprintf("%+v", st.Nodes)
			}
		}
		return true, ""
	})
	st := fleetView()
	if st.Nodes[0].CurrentRevision != st.Nodes[1].CurrentRevision || st.Nodes[0].CurrentRevision == st.Nodes[2].CurrentRevision {
		t.Errorf("revisions a %d, b %d, c %d: want a and b at the override's, c at its own", st.Nodes[0].CurrentRevision, st.Nodes[1].CurrentRevision, st.Nodes[2].CurrentRevision)
	}

	mfs, err := a.d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	gauges := map[string]float64{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "lbdns_fleet_") {
			gauges[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if gauges["lbdns_fleet_heartbeat_alive"] != 1 || gauges["lbdns_fleet_intent_revision"] != float64(st.Nodes[0].CurrentRevision) {
		t.Errorf("fleet gauges %v, want alive 1 and revision %d", gauges, st.Nodes[0].CurrentRevision)
	}

	other.stop()
	if st := fleetView(); len(st.Nodes) != 2 || st.Nodes[0].Name != "a" || st.Nodes[1].Name != "b" {
		t.Fatalf("after c stopped: %+v, want a and b", st.Nodes)
	}
}

// TestFleetWrongCertificate: a node whose certificate etcd does not
// trust does not start, and says why.
func TestFleetWrongCertificate(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	other, err := etcdtest.NewCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	cr.CertFile, cr.KeyFile, err = other.Issue("node", "lbdns")
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{ConfigPath: fleetConfig(t, c, cr, "a", "c1"), Client: vip.NewMemClient(), Probe: (&fakeProbe{}).probe, Identify: noIdentify})
	if err == nil || !strings.Contains(err.Error(), "etcd refused the TLS connection") {
		t.Fatalf("New: %v, want a refused TLS connection", err)
	}
	t.Logf("refused: %v", err)
}

// deafStore is a store that delivers nothing: the daemon never hears of
// another node's write.
type deafStore struct{ intent.Store }

func (deafStore) Watch(ctx context.Context) <-chan intent.Stored {
	ch := make(chan intent.Stored)
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

// TestFleetStaleWrite: an override decided on a revision another node
// has since replaced is refused with a conflict (409) that says what
// changed, and changes nothing.
func TestFleetStaleWrite(t *testing.T) {
	c := etcdtest.StartT(t, 3)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	path := fleetConfig(t, c, cr, "a", "c1")
	cfg, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := etcdfleet.Connect(ctx, cfg.Fleet)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	store := etcdfleet.NewStore(cli, etcdfleet.StoreOptions{Keys: etcdfleet.KeysOf(cfg.Fleet.Prefix, "c1", "a")})
	mem := vip.NewMemClient()
	d, err := New(Options{ConfigPath: path, Client: mem, Probe: (&fakeProbe{}).probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond, Store: deafStore{store}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	h := &harness{d: d, cancel: stop, done: make(chan error, 1)}
	go func() { h.done <- d.Run(rctx) }()
	t.Cleanup(h.stop)
	waitDests(t, mem, "127.0.0.1:5301", "127.0.0.1:5302", "127.0.0.1:5303") // warm: the override is judged on facts

	other := etcdfleet.NewStore(cli, etcdfleet.StoreOptions{Keys: etcdfleet.KeysOf(cfg.Fleet.Prefix, "c1", "b")})
	cur, err := other.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Save(ctx, intent.State{Overrides: []intent.Override{{Resolver: "unbound-1", Action: intent.ActionDrain, Set: time.Now().UTC()}}}, cur.Revision); err != nil {
		t.Fatal(err)
	}
	_, err = d.SetOverride(ctx, control.OverrideRequest{Action: control.ActionDisable, Resolver: "bind-1"}, "uid 0")
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != http.StatusConflict || !strings.Contains(err.Error(), "changed meanwhile") {
		t.Fatalf("stale override: %v, want a 409 saying the intent changed meanwhile", err)
	}
	t.Logf("refused: %v", err)
	// The refused override is not in force; the other node's, which won,
	// is (a retry is decided on it).
	if in, _ := d.Hub().Intent.Load(); len(in.State.Overrides) != 1 || in.State.Overrides[0].Resolver != "unbound-1" {
		t.Errorf("in force after the refusal: %+v, want only the other node's unbound-1", in.State.Overrides)
	}
}

// TestFleetEmergencySwitch: intelligent resolution switched off on one
// node is off on a node of another cluster, which answers the static set;
// switched on again from that node, it is on on the first.
func TestFleetEmergencySwitch(t *testing.T) {
	c, cr, fp, ports, gslbFor := gslbFleet(t)
	a := start(t, fleetConfig(t, c, cr, "a", "c1", gslbFor("a")), vip.NewMemClient(), fp)
	b := start(t, fleetConfig(t, c, cr, "b", "c2", gslbFor("b")), vip.NewMemClient(), fp)
	answers := func(node string, want string) { t.Helper(); answersA(t, node, ports[node], want) }
	answers("a", "[192.0.2.80]")
	answers("b", "[192.0.2.80]")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := (backend{a.d}).SetGSLB(ctx, control.GSLBRequest{Action: control.GSLBOff, Name: "www.gslb.example", Reason: "fleet test"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	answers("b", "[198.51.100.9]")
	if _, err := (backend{b.d}).SetGSLB(ctx, control.GSLBRequest{Action: control.GSLBOn}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	answers("a", "[192.0.2.80]")
}
