package prefetch

import (
	"net/netip"
	"testing"
	"time"

	"lbdns/configs"

	"github.com/miekg/dns"
)

func TestSpecs(t *testing.T) {
	cfg, err := configs.Load("../configs/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	specs := Specs(cfg)
	// www: 2 types x 9 resolvers x 2 partitions; api: 1 type x 9 x none.
	if len(specs) != 45 {
		t.Fatalf("%d specs, want 45", len(specs))
	}
	byKey := map[Key]Spec{}
	for _, sp := range specs {
		if _, dup := byKey[sp.Key]; dup {
			t.Errorf("duplicate spec %v", sp.Key)
		}
		byKey[sp.Key] = sp
	}
	tests := []struct {
		name string
		key  Key
		want Spec
	}{
		{"bind window 2s, eligibility 9s", Key{"api.example.com.", dns.TypeA, "bind-1", ""},
			Spec{Addr: netip.MustParseAddrPort("198.51.100.11:53"), Policy: Policy{Mode: Window, Window: 2 * time.Second, MinTTL: BINDMinTTL}}},
		{"unbound window 10%", Key{"api.example.com.", dns.TypeA, "unbound-1", ""},
			Spec{Addr: netip.MustParseAddrPort("198.51.100.21:53"), Policy: Policy{Mode: Window, Percent: 10}}},
		{"unbound default expiry", Key{"api.example.com.", dns.TypeA, "unbound-2", ""},
			Spec{Addr: netip.MustParseAddrPort("198.51.100.22:53"), Policy: Policy{Mode: Expiry}}},
		{"dnsmasq expiry with ECS v6", Key{"www.example.com.", dns.TypeAAAA, "dnsmasq-6", "us"},
			Spec{Addr: netip.MustParseAddrPort("[2001:db8:1::51]:5353"), ECS: netip.MustParseAddr("2001:db8:2::1"), Policy: Policy{Mode: Expiry}}},
		{"ECS v4 partition", Key{"www.example.com.", dns.TypeA, "knot-1", "eu"},
			Spec{Addr: netip.MustParseAddrPort("198.51.100.41:53"), ECS: netip.MustParseAddr("192.0.2.1"), Policy: Policy{Mode: Expiry}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := byKey[tt.key]
			tt.want.Key = tt.key
			if !ok || got != tt.want {
				t.Errorf("spec %v = %+v (found %v), want %+v", tt.key, got, ok, tt.want)
			}
		})
	}
}
