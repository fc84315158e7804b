package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/control"
	"lbdns/intent"
	"lbdns/vip"
)

// emergencyExtra adds zone gslb.example. with the name www (static set
// 198.51.100.9) over the GSLB pool of gslbExtra, served on port %d.
const emergencyExtra = `
[[gslb.zone]]
name = "gslb.example"
ns = ["ns1.gslb.example."]

[[gslb.name]]
name = "www.gslb.example"
static = ["198.51.100.9"]

[[gslb.name.policy]]
pool = "www"

[gslb.server]
listen = ["127.0.0.1:%d"]
`

// TestSetGSLBPersistsBeforeEffect: a GSLB request the store cannot save
// is refused and changes nothing (answers, status, events); once saved it
// is in the answers when SetGSLB returns, in the status with its audit,
// and in the events; an unknown name is a 404 with a suggestion.
func TestSetGSLBPersistsBeforeEffect(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	path := writeConfig(t, dir, fmt.Sprintf(gslbExtra, "www.example.", 100)+fmt.Sprintf(emergencyExtra, port))
	fp := &fakeProbe{down: map[netip.AddrPort]bool{}}
	store := &memStore{}
	d, err := New(Options{ConfigPath: path, Client: vip.NewMemClient(), Probe: fp.probe, Identify: noIdentify, TickInterval: 50 * time.Millisecond, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	run(t, d, fp, nil)
	ctx := context.Background()
	waitMember(t, d, "up")

	answer := func() []string {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion("www.gslb.example.", dns.TypeA)
		r, err := dns.Exchange(m, fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, rr := range r.Answer {
			out = append(out, rr.(*dns.A).A.String())
		}
		return out
	}
	deadline := time.Now().Add(5 * time.Second)
	for fmt.Sprint(answer()) != "[192.0.2.80]" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := answer(); fmt.Sprint(got) != "[192.0.2.80]" {
		t.Fatalf("dynamic answer %v", got)
	}

	store.mu.Lock()
	store.fail = errors.New("store unreachable")
	store.mu.Unlock()
	req := control.GSLBRequest{Action: control.GSLBOff, Name: "www.gslb.example", Reason: "wrong answers"}
	if _, err := (backend{d}).SetGSLB(ctx, req, "uid 0"); err == nil || err.Error() != "cannot persist the gslb request, nothing changed: store unreachable" {
		t.Fatalf("off with a failing store: %v", err)
	}
	if got := answer(); fmt.Sprint(got) != "[192.0.2.80]" {
		t.Errorf("a switch that was not saved changed the answers: %v", got)
	}
	if st, _ := d.Status(ctx); len(st.GSLBIntent) != 0 {
		t.Errorf("a switch that was not saved is in the status: %+v", st.GSLBIntent)
	}

	store.mu.Lock()
	store.fail = nil
	store.mu.Unlock()
	rep, err := (backend{d}).SetGSLB(ctx, req, "uid 0")
	if err != nil || !rep.Changed || len(rep.Intent) != 1 {
		t.Fatalf("off: %+v %v", rep, err)
	}
	if got := answer(); fmt.Sprint(got) != "[198.51.100.9]" {
		t.Errorf("answers when SetGSLB returned: %v, want the static set", got)
	}
	st, _ := d.Status(ctx)
	if len(st.GSLBIntent) != 1 || st.GSLBIntent[0].By != "uid 0" || st.GSLBIntent[0].Reason != "wrong answers" || fmt.Sprint(st.GSLBIntent[0].Names) != "[www.gslb.example.]" {
		t.Errorf("status: %+v", st.GSLBIntent)
	}
	if r := st.GSLBResponder; r == nil || !r.On || fmt.Sprint(r.Listen) != fmt.Sprintf("[127.0.0.1:%d]", port) || fmt.Sprint(r.Zones) != "[gslb.example.]" {
		t.Errorf("status of the responder: %+v", r)
	}
	store.mu.Lock()
	saved := store.st.Clone()
	store.mu.Unlock()
	if len(saved.Emergencies) != 1 || saved.Emergencies[0].Name != "www.gslb.example." || saved.Emergencies[0].Mode != intent.ModeStatic {
		t.Errorf("stored: %+v", saved)
	}
	evs, _, _ := d.evlog.Since(0)
	found := false
	for _, ev := range evs {
		found = found || ev.Kind == control.EventGSLB && ev.Message == "intelligent resolution off for name www.gslb.example.: static answers, ECS scope 0 (reason: wrong answers) by uid 0"
	}
	if !found {
		t.Errorf("no gslb event in %+v", evs)
	}

	_, err = (backend{d}).SetGSLB(ctx, control.GSLBRequest{Action: control.GSLBOff, Name: "ww.gslb.example", Reason: "x"}, "uid 0")
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != http.StatusNotFound || ce.Message != `unknown GSLB name "ww.gslb.example." (did you mean "www.gslb.example."?)` {
		t.Errorf("unknown name: %v", err)
	}

	if _, err := (backend{d}).SetGSLB(ctx, control.GSLBRequest{Action: control.GSLBOn}, "uid 0"); err != nil {
		t.Fatal(err)
	}
	if got := answer(); fmt.Sprint(got) != "[192.0.2.80]" {
		t.Errorf("answers after on: %v", got)
	}
}
