package alarms

import (
	"testing"

	"lbdns/configs"
	"lbdns/flood"
)

// TestAutoClient: the top client address when it has the share, else
// the top prefix when it has it, else none.
func TestAutoClient(t *testing.T) {
	alarm := func(client, prefix float64) flood.Alarm {
		return flood.Alarm{Top: []flood.View{
			{Kind: flood.KindName, Entries: []flood.ViewEntry{{Key: "www.g.test.", Share: 0.9}}},
			{Kind: flood.KindClient, Entries: []flood.ViewEntry{{Key: "192.0.2.7", Share: client}}},
			{Kind: flood.KindPrefix, Entries: []flood.ViewEntry{{Key: "192.0.2.0/24", Share: prefix}}},
		}}
	}
	for _, tc := range []struct {
		client, prefix float64
		want           string
	}{
		{0.6, 0.9, "192.0.2.7"},
		{0.2, 0.6, "192.0.2.0/24"},
		{0.2, 0.3, ""},
	} {
		got, ok := autoClient(alarm(tc.client, tc.prefix), 0.5)
		if ok != (tc.want != "") || got.Key != tc.want {
			t.Errorf("shares %.1f/%.1f: %q %v, want %q", tc.client, tc.prefix, got.Key, ok, tc.want)
		}
	}
}

// TestIsGSLBName: a [[gslb.name]] matches fully qualified and lower
// case, by its FQDN when set, else by its name.
func TestIsGSLBName(t *testing.T) {
	cfg := &configs.Config{}
	cfg.GSLB.Names = []configs.GSLBName{{Name: "WWW.g.test"}, {Name: "api", FQDN: "api.g.test."}}
	for name, want := range map[string]bool{"www.g.test.": true, "api.g.test.": true, "api.": false, "other.g.test.": false} {
		if got := isGSLBName(cfg, name); got != want {
			t.Errorf("isGSLBName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestOff: with [flood] off there is no component, and its methods are
// those of one that counts nothing.
func TestOff(t *testing.T) {
	f, err := New(Options{Config: &configs.Config{}})
	if f != nil || err != nil {
		t.Fatalf("New with [flood] off: %v %v, want nil", f, err)
	}
	if f.Pipeline() != nil {
		t.Error("a nil component has a pipeline")
	}
	if _, err := f.Top(t.Context(), "responder", "client", 0); err == nil {
		t.Error("Top with [flood] off: nil error, want unavailable")
	}
	<-f.Run(t.Context())
}
