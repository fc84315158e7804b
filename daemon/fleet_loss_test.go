package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/fleet/etcdfleet"
	"lbdns/testkit/etcdtest"
	"lbdns/testkit/poll"
	"lbdns/vip"
)

// answersA polls the GSLB responder on port until www.gslb.example. A
// is want.
func answersA(t *testing.T, node string, port int, want string) {
	t.Helper()
	poll.Until(t, 15*time.Second, node+" to answer "+want, func() (bool, string) {
		m := new(dns.Msg)
		m.SetQuestion("www.gslb.example.", dns.TypeA)
		r, err := dns.Exchange(m, fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, rr := range r.Answer {
			got = append(got, rr.(*dns.A).A.String())
		}
		return fmt.Sprint(got) == want, fmt.Sprint(got)
	})
}

// gslbFleet starts a three-member etcd with a user of prefix
// /lbdns-test/, and returns it with the user's certificates, a probe
// that finds every target up, a free GSLB port for nodes a and b, and
// the GSLB tables of each (www.gslb.example. over gslbExtra's pool).
func gslbFleet(t *testing.T) (*etcdtest.Cluster, etcdtest.Creds, *fakeProbe, map[string]int, func(name string) string) {
	t.Helper()
	c := etcdtest.StartT(t, 3)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{"a": freePort(t), "b": freePort(t)}
	gslbFor := func(name string) string {
		return fmt.Sprintf(gslbExtra, "www.example.", 100) + fmt.Sprintf(emergencyExtra, ports[name])
	}
	return c, cr, &fakeProbe{}, ports, gslbFor
}

// waitEtcd waits until node's status says etcd is reachable (or not).
func waitEtcd(t *testing.T, name string, d *Daemon, reachable bool) *control.FleetEtcd {
	t.Helper()
	var last *control.FleetEtcd
	poll.Until(t, 20*time.Second, fmt.Sprintf("%s: etcd reachable %v", name, reachable), func() (bool, string) {
		st, err := d.Status(context.Background())
		if err != nil {
			return false, err.Error()
		}
		last = st.Fleet
		return last != nil && last.Reachable == reachable, fmt.Sprintf("%+v", last)
	})
	return last
}

// hasEvent reports whether d's event log holds a fleet event whose
// message contains s.
func hasEvent(d *Daemon, s string) bool {
	evs, _, _ := d.Events().Since(0)
	for _, ev := range evs {
		if ev.Kind == control.EventFleet && strings.Contains(ev.Message, s) {
			return true
		}
	}
	return false
}

// gauge returns the value of the daemon's gauge name.
func gauge(t *testing.T, d *Daemon, name string) float64 {
	t.Helper()
	mfs, err := d.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestFleetEtcdLost: node a reaches etcd through one member only; when
// that member stops, a keeps answering from the intent it applied (the
// emergency switch), says so (status, /v1/fleet, metric, event), and
// refuses a change at once with a 503 naming etcd; node b, on the other
// members, switches the name on again and the history is compacted; when
// the member is back, a reads the intent whole and answers as b does.
// Restarted while its member is down, a serves the local copy of the
// intent it applied last, says so, and takes etcd's when it is back.
func TestFleetEtcdLost(t *testing.T) {
	c, cr, fp, ports, gslbFor := gslbFleet(t)
	pathA := fleetConfigAt(t, c.Endpoints[:1], cr, "a", "c1", gslbFor("a"))
	a := start(t, pathA, vip.NewMemClient(), fp)
	b := start(t, fleetConfigAt(t, c.Endpoints[1:], cr, "b", "c2", gslbFor("b")), vip.NewMemClient(), fp)
	answersA(t, "a", ports["a"], "[192.0.2.80]")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := (backend{a.d}).SetGSLB(ctx, control.GSLBRequest{Action: control.GSLBOff, Name: "www.gslb.example", Reason: "before the cut"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	answersA(t, "b", ports["b"], "[198.51.100.9]")
	if et := waitEtcd(t, "a", a.d, true); et.IntentSource != control.IntentFromEtcd || et.IntentRevision == 0 {
		t.Errorf("a before the cut: %+v, want the intent from etcd", et)
	}

	c.StopMember(0) // a's only member
	et := waitEtcd(t, "a", a.d, false)
	t.Logf("a without etcd: %+v", et)
	if et.Error == "" {
		t.Error("a's status gives no reason for losing etcd")
	}
	if g := gauge(t, a.d, "lbdns_fleet_etcd_reachable"); g != 0 {
		t.Errorf("lbdns_fleet_etcd_reachable %v while etcd is lost", g)
	}
	if !hasEvent(a.d, "etcd unreachable") {
		t.Error("no fleet event for the loss of etcd")
	}
	if fs, err := a.d.Fleet(ctx); err != nil || fs.Etcd == nil || fs.Etcd.Reachable || fs.Error == "" {
		t.Errorf("GET /v1/fleet on a: %+v %v, want etcd unreachable", fs, err)
	}
	answersA(t, "a", ports["a"], "[198.51.100.9]") // still the switch it applied

	// A change is refused before the 3s a client waits here (a hang in
	// the loop would end in this context's deadline instead).
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	_, err := (backend{a.d}).SetGSLB(rctx, control.GSLBRequest{Action: control.GSLBOn}, "uid 0")
	rcancel()
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != http.StatusServiceUnavailable || ce.Unavailable != control.UnavailableEtcd || !strings.Contains(ce.Message, "nothing was changed") {
		t.Fatalf("a change without etcd: %v, want a 503 naming etcd", err)
	}
	t.Logf("refused: %v", err)
	answersA(t, "a", ports["a"], "[198.51.100.9]")

	// Meanwhile b switches the name on again, and raises its TTL; the
	// revisions a missed are compacted away.
	if _, err := (backend{b.d}).SetGSLB(ctx, control.GSLBRequest{Action: control.GSLBOn}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := (backend{b.d}).SetGSLB(ctx, control.GSLBRequest{Action: control.GSLBTTL, Name: "www.gslb.example", Seconds: 600, Reason: "during the cut"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	inB, _ := b.d.Hub().Intent.Load()

	if err := c.StartMember(0); err != nil {
		t.Fatal(err)
	}
	waitEtcd(t, "a", a.d, true)
	answersA(t, "a", ports["a"], "[192.0.2.80]")
	poll.Until(t, 15*time.Second, "a at b's revision with its TTL raise", func() (bool, string) {
		in, _ := a.d.Hub().Intent.Load()
		return in.Revision == inB.Revision && len(in.State.TTLRaises) == 1 && len(in.State.Emergencies) == 0, fmt.Sprintf("%+v, b at %d", in, inB.Revision)
	})
	if !hasEvent(a.d, "etcd reachable again") {
		t.Error("no fleet event for the return of etcd")
	}

	// A restart while a's member is down: the local copy is served.
	a.stop()
	c.StopMember(0)
	a2 := start(t, pathA, vip.NewMemClient(), fp)
	et = waitEtcd(t, "a restarted", a2.d, false)
	if et.IntentSource != control.IntentFromLocalCopy || et.IntentRevision != inB.Revision {
		t.Errorf("a restarted without etcd: %+v, want the local copy at revision %d", et, inB.Revision)
	}
	if in, _ := a2.d.Hub().Intent.Load(); len(in.State.TTLRaises) != 1 {
		t.Errorf("a restarted without etcd serves %+v, want the copy's TTL raise", in.State)
	}
	if !hasEvent(a2.d, "started without etcd") {
		t.Error("no fleet event for a start without etcd")
	}
	answersA(t, "a restarted", ports["a"], "[192.0.2.80]")
	if _, err := (backend{b.d}).SetGSLB(ctx, control.GSLBRequest{Action: control.GSLBOff, Name: "www.gslb.example", Reason: "while a is down"}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	if err := c.StartMember(0); err != nil {
		t.Fatal(err)
	}
	et = waitEtcd(t, "a restarted", a2.d, true)
	answersA(t, "a restarted", ports["a"], "[198.51.100.9]")
	poll.Until(t, 10*time.Second, "a restarted: the intent from etcd", func() (bool, string) {
		et := a2.d.fleet.Etcd()
		return et.IntentSource == control.IntentFromEtcd, fmt.Sprintf("%+v", et)
	})
}

// TestFleetBadLocalCopy: a node that cannot reach etcd and whose local
// copy of the intent cannot be parsed does not start, naming the file.
func TestFleetBadLocalCopy(t *testing.T) {
	c := etcdtest.StartT(t, 1)
	cr, err := c.User("lbdns", "/lbdns-test/")
	if err != nil {
		t.Fatal(err)
	}
	path := fleetConfigAt(t, c.Endpoints, cr, "a", "c1")
	copyPath := filepath.Join(filepath.Dir(path), "state", etcdfleet.CopyFile)
	if err := os.MkdirAll(filepath.Dir(copyPath), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyPath, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.StopMember(0)
	_, err = New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: (&fakeProbe{}).probe, Identify: noIdentify})
	if err == nil || !strings.Contains(err.Error(), copyPath) || !strings.Contains(err.Error(), "remove it to start without intent") {
		t.Fatalf("New without etcd and with a bad local copy: %v, want a refusal naming %s", err, copyPath)
	}
	t.Logf("refused: %v", err)
	if err := c.StartMember(0); err != nil {
		t.Fatal(err)
	}
}
