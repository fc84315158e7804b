package main

import (
	"strings"
	"testing"
	"time"

	"lbdns/control"
)

func TestHostRequests(t *testing.T) {
	withdraw := time.Date(2026, 1, 2, 3, 4, 35, 0, time.UTC)
	for _, tc := range []struct {
		name string
		args []string
		want control.HostRequest
		rep  control.HostReply
		out  string
	}{
		{"drain", []string{"host", "drain", "--reason", "kernel upgrade"}, control.HostRequest{Action: "drain", Reason: "kernel upgrade"},
			control.HostReply{Message: "host drained", Changed: true, Drain: &control.HostDrainStatus{WithdrawAt: withdraw}},
			"host drained (withdrawal at 2026-01-02T03:04:35Z)\n"},
		{"enable", []string{"host", "enable"}, control.HostRequest{Action: "enable"}, control.HostReply{Message: "host enabled", Changed: true}, "host enabled\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, map[string]reply{"POST /v1/host": {body: tc.rep}})
			r := lbctl(t, append([]string{"-socket", f.socket}, tc.args...)...)
			if r.code != exitOK || r.stdout != tc.out {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			reqs := f.received()
			if len(reqs) != 1 || reqs[0].route != "POST /v1/host" {
				t.Fatalf("requests %+v", reqs)
			}
			var got control.HostRequest
			decodeJSON(t, reqs[0].body, &got)
			if got != tc.want {
				t.Errorf("request %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestHostUsage(t *testing.T) {
	for _, args := range [][]string{{"host"}, {"host", "pause"}, {"host", "enable", "--reason", "x"}, {"host", "drain", "extra"}, {"bgp"}, {"bgp", "peers"}} {
		f := startFake(t, nil)
		r := lbctl(t, append([]string{"-socket", f.socket}, args...)...)
		if r.code != exitUsage || len(f.received()) != 0 {
			t.Errorf("%v: exit %d stderr %q, requests %v", args, r.code, r.stderr, f.received())
		}
	}
}

func TestBGPStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	since := now.Add(-90 * time.Second)
	st := control.Status{Generated: now, BGP: &control.BGPStatus{RouterID: "198.51.100.1", LocalAS: 65001,
		Peers: []control.BGPPeer{{Address: "198.51.100.254", AS: 65000, State: "established", Since: &since, UptimeSeconds: 90},
			{Address: "198.51.100.253", AS: 65000, State: "active", LastError: "Hold timer expired", ReasonCode: "md5-mismatch", Reason: "TCP MD5 signature mismatch with the router: it signs with another password (the kernel dropped 3 segments from 198.51.100.253: TCPMD5Failure rose); check [[bgp.peer]] password against the router's"}},
		Prefixes: []control.BGPPrefix{
			{Prefix: "192.0.2.53/32", Kind: "vip", Name: "v4", Announced: true, MED: 1000, Communities: []string{"65001:200", "65535:0"}, Degraded: true, Draining: true, Reason: "draining: ..."},
			{Prefix: "192.0.2.54/32", Kind: "vip", Name: "v5", Reason: "withdrawn: vip v5: not serving"},
		},
		Drain: &control.HostDrainStatus{Reason: "kernel", By: "uid 0", Set: now.Add(-10 * time.Second), WithdrawAt: now.Add(20 * time.Second)},
	}}
	f := startFake(t, map[string]reply{"GET /v1/status": {body: st}})
	r := lbctl(t, "-socket", f.socket, "bgp", "status")
	if r.code != exitOK {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"BGP: router id 198.51.100.1, AS 65001", "!! HOST DRAINED since 2026-01-02T03:03:55Z by uid 0: kernel",
		"withdrawn at 2026-01-02T03:04:25Z", "198.51.100.254  65000  established  1m30s", "Hold timer expired",
		"PEER            AS     STATE        UPTIME  LAST ERROR          WHY", "Hold timer expired  TCP MD5 signature mismatch with the router: it signs",
		"!! BGP SESSION DOWN with 198.51.100.253 (AS 65000): active: TCP MD5 signature mismatch with the router",
		"192.0.2.53/32  vip   v4    yes        1000  65001:200 65535:0", "192.0.2.54/32  vip   v5    no         -"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = lbctl(t, "-socket", f.socket, "-o", "json", "bgp", "status")
	var got control.BGPStatus
	decodeJSON(t, r.stdout, &got)
	if got.RouterID != "198.51.100.1" || len(got.Prefixes) != 2 || got.Drain == nil || got.Peers[1].ReasonCode != "md5-mismatch" || !strings.HasPrefix(got.Peers[1].Reason, "TCP MD5") {
		t.Errorf("json: %+v", got)
	}
	r = lbctl(t, "-socket", f.socket, "status")
	if r.code != exitOK || !strings.Contains(r.stdout, "!! HOST DRAINED since") || !strings.Contains(r.stdout, "!! BGP SESSION DOWN with 198.51.100.253 (AS 65000): active: TCP MD5 signature mismatch") {
		t.Errorf("lbctl status without the BGP banners: exit %d\n%s", r.code, r.stdout)
	}
	off := startFake(t, map[string]reply{"GET /v1/status": {body: control.Status{Generated: now}}})
	if r := lbctl(t, "-socket", off.socket, "bgp", "status"); r.code != exitOK || !strings.Contains(r.stdout, "BGP: off") {
		t.Errorf("without [bgp]: exit %d %q", r.code, r.stdout)
	}
}
