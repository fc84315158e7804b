package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

// TestChangeRefusedWithoutEtcd: a change the daemon refuses because it
// cannot reach the fleet's etcd exits 5 (not 1, a refusal on the merits)
// with the daemon's message; with -o json the reply says unavailable etcd.
func TestChangeRefusedWithoutEtcd(t *testing.T) {
	msg := "the fleet's etcd is unreachable (since 2026-12-01T14:20:00Z, 12s ago): the fleet's intent is kept in etcd only, so nothing was changed on this host or elsewhere"
	body := control.ErrorReply{Error: msg, Unavailable: control.UnavailableEtcd}
	f := startFake(t, map[string]reply{
		"POST /v1/gslb":      {code: http.StatusServiceUnavailable, body: body},
		"POST /v1/overrides": {code: http.StatusServiceUnavailable, body: body},
	})
	for _, args := range [][]string{{"gslb", "off", "--name", "www.g.test", "--reason", "x"}, {"drain", "bind-1"}} {
		r := lbctl(t, append([]string{"-socket", f.socket}, args...)...)
		if r.code != exitNoEtcd || r.stderr != "lbctl: "+msg+"\n" {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and the message", args, r.code, r.stderr, exitNoEtcd)
		}
	}
	r := lbctl(t, "-socket", f.socket, "-o", "json", "gslb", "on")
	if r.code != exitNoEtcd || !strings.Contains(r.stdout, `"unavailable": "etcd"`) {
		t.Errorf("-o json: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestFleetStatusEtcdUnreachable: lbctl fleet status on a node cut off
// from etcd says so first, with the intent it serves and why.
func TestFleetStatusEtcdUnreachable(t *testing.T) {
	st := control.FleetStatus{On: true, Node: "a", Location: "dc1", Error: "etcd unreachable: the fleet view cannot be read (this node serves the intent it applied last)",
		Etcd: &control.FleetEtcd{Error: "context deadline exceeded", IntentRevision: 7, IntentSource: control.IntentFromLocalCopy}, Nodes: []control.FleetNode{}}
	f := startFake(t, map[string]reply{"GET /v1/fleet": {body: st}})
	r := lbctl(t, "-socket", f.socket, "fleet", "status")
	if r.code != exitOK || !strings.Contains(r.stdout, "ETCD UNREACHABLE since") ||
		!strings.Contains(r.stdout, "serving the intent applied last (revision 7, from local copy); intent changes are refused (exit 5) until it is back: context deadline exceeded") {
		t.Errorf("exit %d, stdout:\n%s", r.code, r.stdout)
	}
}

// TestStatusEtcdUnreachable: lbctl status on a node cut off from etcd
// starts with a line saying so; reachable, there is none.
func TestStatusEtcdUnreachable(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	for _, f := range []*control.FleetEtcd{
		{Reachable: true, Since: now.Add(-time.Hour), IntentRevision: 3, IntentSource: control.IntentFromEtcd},
		{Since: now.Add(-2 * time.Minute), IntentRevision: 3, IntentSource: control.IntentFromEtcd, Error: "context deadline exceeded"},
	} {
		st := control.Status{Generated: now, Fleet: f}
		fk := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
		r := lbctl(t, "-socket", fk.socket, "status")
		banner := strings.HasPrefix(r.stdout, "FLEET: ETCD UNREACHABLE since ") && strings.Contains(r.stdout, "(2m0s ago): serving the intent applied last (revision 3, from etcd)")
		if r.code != exitOK || banner == f.Reachable {
			t.Errorf("reachable %v: exit %d, stdout:\n%s", f.Reachable, r.code, r.stdout)
		}
	}
}
