package alarms

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/flood"
)

// TestTopReplyAndConfig: a view as GET /v1/top answers it; [flood] as
// the pipeline takes it.
func TestTopReplyAndConfig(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var rc [17]uint64
	rc[dns.RcodeSuccess], rc[dns.RcodeNameError], rc[16] = 90, 8, 2
	v := flood.View{Kind: flood.KindName, Start: at, End: at.Add(10 * time.Second), Queries: 100, Rcodes: rc,
		Entries: []flood.ViewEntry{{Key: "a.example.", Count: 60, Error: 1, Rate: 6, RateError: 0.1, Share: 0.6}}}
	rep := TopReply(v, 10*time.Second)
	if rep.Kind != "names" || rep.Seconds != 10 || rep.Rate != 10 || rep.Rcodes["NOERROR"] != 90 || rep.Rcodes["NXDOMAIN"] != 8 || rep.Rcodes["none"] != 2 ||
		len(rep.Entries) != 1 || rep.Entries[0] != (control.TopEntry{Key: "a.example.", Count: 60, Error: 1, Rate: 6, RateError: 0.1, Share: 0.6}) {
		t.Errorf("TopReply: %+v", rep)
	}
	if rep := TopReply(flood.View{Kind: flood.KindClient}, time.Minute); rep.Seconds != 0 || rep.Entries == nil || len(rep.Entries) != 0 {
		t.Errorf("empty view: %+v", rep)
	}
	cfg, err := configs.Load("../../configs/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	fc := ConfigOf(cfg)
	if fc.Tracker.Counters != 512 || fc.Alarms.Floor != 1000 || fc.Alarms.Share != 0.5 || len(fc.Alarms.ShareKinds) != 2 || fc.Tracker.Full != 20000 {
		t.Errorf("FloodConfig: %+v", fc)
	}
}
