package responder

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lbdns/gslb"
	"lbdns/health"
	"lbdns/hub"
)

// TestFrontVerdicts: the hub hears a verdict per front listen address,
// named by front and address: serving while its front listens and a
// snapshot answers; not serving, with the reason, when its certificate
// cannot be loaded or its address cannot be bound.
func TestFrontVerdicts(t *testing.T) {
	h := hub.New(nil)
	r := NewResponder(ResponderOptions{Hub: h})
	defer r.Stop(context.Background())
	fronts := func() []hub.Verdict {
		st, _ := h.Responder.Load()
		return st.Fronts
	}
	cfg, _ := frontsExplainConfig(t, "")
	if err := r.Update(cfg, gslb.Evaluate(cfg, states(health.Up, health.Up), time.Now())); err != nil {
		t.Fatal(err)
	}
	got := fronts()
	if len(got) != 2 || got[0].Name != "doh 127.0.0.1:0" || got[1].Name != "dot 127.0.0.1:0" || !got[0].Serving || !got[1].Serving ||
		!strings.HasPrefix(got[0].Reason, "answering doh on 127.0.0.1:") || !strings.HasPrefix(got[1].Reason, "answering dot on 127.0.0.1:") {
		t.Fatalf("serving: %+v", got)
	}

	// A certificate that cannot be loaded: nothing serves, and says why.
	bad, _ := frontsExplainConfig(t, "")
	bad.GSLB.TLS.CertFile = filepath.Join(t.TempDir(), "missing.pem")
	_ = r.Update(bad, gslb.Evaluate(bad, states(health.Up, health.Up), time.Now())) // logged
	for _, v := range fronts() {
		if v.Serving || !strings.Contains(v.Reason, "not listening: ") || !strings.Contains(v.Reason, "missing.pem") {
			t.Errorf("certificate missing: %+v", v)
		}
	}

	// A DoH address taken by another program.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken, _ := frontsExplainConfig(t, "")
	taken.GSLB.TLS.DoHListen = []string{ln.Addr().String()}
	taken.GSLB.TLS.DoHAddrs[0] = ln.Addr().(*net.TCPAddr).AddrPort()
	_ = r.Update(taken, gslb.Evaluate(taken, states(health.Up, health.Up), time.Now())) // logged
	got = fronts()
	if len(got) != 2 || got[0].Name != "doh "+ln.Addr().String() || got[0].Serving || !strings.Contains(got[0].Reason, "address already in use") {
		t.Errorf("address taken: %+v", got)
	}

	// Back to the good configuration: serving again.
	good, _ := frontsExplainConfig(t, "")
	if err := r.Update(good, gslb.Evaluate(good, states(health.Up, health.Up), time.Now())); err != nil {
		t.Fatal(err)
	}
	for _, v := range fronts() {
		if !v.Serving {
			t.Errorf("after the repair: %+v", v)
		}
	}
}
