package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"lbdns/control"
	"lbdns/internal/etcdtest"
	"lbdns/internal/poll"
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

// fleetConfig writes node name's configuration in a directory of its own.
func fleetConfig(t *testing.T, c *etcdtest.Cluster, cr etcdtest.Creds, name, cluster string) string {
	t.Helper()
	eps := make([]string, len(c.Endpoints))
	for i, e := range c.Endpoints {
		eps[i] = fmt.Sprintf("%q", e)
	}
	return writeConfig(t, t.TempDir(), fmt.Sprintf(fleetExtra, strings.Join(eps, ", "), name, cluster, cr.CAFile, cr.CertFile, cr.KeyFile))
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
		st, err := backend{a.d}.Fleet(ctx)
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
