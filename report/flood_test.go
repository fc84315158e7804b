package report

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/flood"
	"lbdns/vip"
)

// TestJournalFloodAlarm: an alarm raised is one warning line and one
// event naming the top clients, prefixes and names with their rates and
// errors; its clearing one info line and one event.
func TestJournalFloodAlarm(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	top := []flood.View{
		{Source: flood.SourceResponder, Kind: flood.KindClient, Entries: []flood.ViewEntry{{Key: "203.0.113.66", Rate: 5000, RateError: 2, Share: 0.926}, {Key: "192.0.2.10", Rate: 20, RateError: 2, Share: 0.004}}},
		{Source: flood.SourceResponder, Kind: flood.KindPrefix, Entries: []flood.ViewEntry{{Key: "203.0.113.0/24", Rate: 5000, Share: 0.926}}},
		{Source: flood.SourceResponder, Kind: flood.KindName, Entries: []flood.ViewEntry{{Key: "boom.app.gslb.example.", Rate: 5010, RateError: 2, Share: 0.928}}},
	}
	rise := flood.Alarm{ID: "responder", Reason: flood.ReasonRise, Raised: true, At: at, Since: at, Source: "responder", Rate: 5400, Baseline: 400, Floor: 1000, Top: top}
	share := flood.Alarm{ID: "share responder clients 203.0.113.66", Reason: flood.ReasonShare, Raised: true, At: at, Since: at, Source: "responder", Rate: 5400, Floor: 1000,
		Kind: flood.KindClient, Key: "203.0.113.66", Share: 0.926, Top: top}
	cleared := rise
	cleared.Raised, cleared.At, cleared.Rate, cleared.Top = false, at.Add(45*time.Second), 380, nil
	logs, evs, _ := journalRun(t, func(j *Journal) {
		j.FloodAlarm(rise)
		j.FloodAlarm(share)
		j.FloodAlarm(cleared)
	})
	if len(logs) != 3 || len(evs) != 3 {
		t.Fatalf("%d log lines, %d events, want 3 and 3: %+v %+v", len(logs), len(evs), logs, evs)
	}
	if l := logs[0]; l.level != slog.LevelWarn || l.msg != "flood alarm: responder at 5400/s, baseline 400/s (floor 1000/s)" ||
		l.attrs["clients"] != "203.0.113.66 5000/s (-2) 93%, 192.0.2.10 20/s (-2) 0%" || l.attrs["names"] != "boom.app.gslb.example. 5010/s (-2) 93%" {
		t.Errorf("raised: %+v", l)
	}
	want := control.Event{Kind: control.EventFlood, Subject: "responder", Error: true,
		Message: "flood alarm: responder at 5400/s, baseline 400/s (floor 1000/s); over the last 2s, of the responder's queries, top clients: 203.0.113.66 5000/s (-2) 93%, 192.0.2.10 20/s (-2) 0%; prefixes: 203.0.113.0/24 5000/s (-0) 93%; names: boom.app.gslb.example. 5010/s (-2) 93%"}
	if evs[0] != want {
		t.Errorf("event:\n got %+v\nwant %+v", evs[0], want)
	}
	if evs[1].Subject != "clients 203.0.113.66" || !strings.HasPrefix(evs[1].Message, "flood alarm: client 203.0.113.66 has 93% of the responder's queries of the last 1s (5400/s in all, floor 1000/s); over the last 2s, of the responder's queries, top clients: ") {
		t.Errorf("share event: %+v", evs[1])
	}
	if logs[2].level != slog.LevelInfo || evs[2].Error || evs[2].Message != "flood alarm cleared: responder at 380/s, baseline 400/s (floor 1000/s), raised 45s ago" {
		t.Errorf("cleared: %+v %+v", logs[2], evs[2])
	}
}

// TestVIPPacketRates: the VIPs' packet rates summed over their
// services' destinations.
func TestVIPPacketRates(t *testing.T) {
	cfg, err := configs.Load("../configs/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	stats := Stats{}
	v0 := &cfg.VIPs[0]
	for i, k := range vip.ServiceKeys(v0) {
		stats[k] = map[netip.AddrPort]vip.DestStats{
			netip.MustParseAddrPort("192.0.2.1:53"): {PPSIn: uint64(100 * (i + 1))},
			netip.MustParseAddrPort("192.0.2.2:53"): {PPSIn: 5},
		}
	}
	rates := VIPPacketRates(cfg, stats)
	var want float64
	for i := range vip.ServiceKeys(v0) {
		want += float64(100*(i+1) + 5)
	}
	if len(rates) != len(cfg.VIPs) || rates["vip "+v0.Name] != want || rates["vip "+cfg.VIPs[1].Name] != 0 {
		t.Errorf("rates %v, want %v for vip %s", rates, want, v0.Name)
	}
	if VIPPacketRates(cfg, nil) != nil {
		t.Error("rates without statistics")
	}
}
