package control

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// TestGSLBMonitorFactsJSON checks that a monitor's facts are keys of its
// JSON object, as the fields they replaced were (cert_days_left,
// loss_percent, socket: the same text), and read back as facts.
func TestGSLBMonitorFactsJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		mo   GSLBMonitor
		want string
	}{
		{"https", GSLBMonitor{Check: "web", Kind: "https", State: "up", LastProbe: at, LastResult: "status 200", LastOK: true, RTTMillis: 12.5,
			Facts: []Fact{{Name: "cert_days_left", Value: 41}}},
			`{"check":"web","kind":"https","state":"up","last_probe":"2026-12-01T10:00:00Z","last_result":"status 200","last_ok":true,"rtt_ms":12.5,"cert_days_left":41}`},
		{"expired", GSLBMonitor{Check: "web", Kind: "https", State: "down", Facts: []Fact{{Name: "cert_days_left", Value: -2}}},
			`{"check":"web","kind":"https","state":"down","last_result":"","rtt_ms":0,"cert_days_left":-2}`},
		{"icmp, facts out of order", GSLBMonitor{Check: "ping", Kind: "icmp", State: "up", RTTMillis: 0.4,
			Facts: []Fact{{Name: "socket", Text: "raw"}, {Name: "loss_percent", Value: 100.0 / 3}}},
			`{"check":"ping","kind":"icmp","state":"up","last_result":"","rtt_ms":0.4,"loss_percent":33.333333333333336,"socket":"raw"}`},
		{"no facts", GSLBMonitor{Check: "dns", Kind: "dns", State: "unknown"},
			`{"check":"dns","kind":"dns","state":"unknown","last_result":"","rtt_ms":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.mo)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("JSON\n %s\nwant\n %s", b, tc.want)
			}
			var back GSLBMonitor
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			b2, _ := json.Marshal(back)
			if string(b2) != tc.want {
				t.Fatalf("read back and written again:\n %s\nwant\n %s", b2, tc.want)
			}
			if f, ok := back.Fact("cert_days_left"); ok {
				want, _ := tc.mo.Fact("cert_days_left")
				if !reflect.DeepEqual(f, want) {
					t.Errorf("fact read back %+v, want %+v", f, want)
				}
			}
		})
	}
	var bad GSLBMonitor
	if err := json.Unmarshal([]byte(`{"check":"x","odd":[1]}`), &bad); err == nil {
		t.Error("a key that is neither a field nor a number or string fact was accepted")
	}
}
