package alarms

import (
	"fmt"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/flood"
)

// TopReply is a flood view as GET /v1/top answers it; window is the
// window asked for.
func TopReply(v flood.View, window time.Duration) *control.TopReply {
	secs := v.Seconds()
	rep := &control.TopReply{Source: v.Source.String(), Kind: v.Kind.String(), Window: window.String(), Start: v.Start, End: v.End,
		Seconds: secs, Queries: v.Queries, Rate: float64(v.Queries) / secs, Entries: []control.TopEntry{}}
	if v.End.IsZero() {
		rep.Seconds, rep.Rate = 0, 0
	}
	for code, n := range v.Rcodes {
		if n == 0 {
			continue
		}
		if rep.Rcodes == nil {
			rep.Rcodes = map[string]uint64{}
		}
		name := "none"
		if code < 16 {
			name = dns.RcodeToString[code]
			if name == "" {
				name = fmt.Sprintf("RCODE%d", code)
			}
		}
		rep.Rcodes[name] = n
	}
	for _, e := range v.Entries {
		rep.Entries = append(rep.Entries, control.TopEntry{Key: e.Key, Count: e.Count, Error: e.Error,
			Rate: e.Rate, RateError: e.RateError, Share: e.Share})
	}
	return rep
}

// StatusAlarm is a raised alarm as the status shows it.
func StatusAlarm(a flood.Alarm) control.FloodAlarm {
	out := control.FloodAlarm{ID: a.ID, Source: a.Source, Reason: string(a.Reason), Since: a.Since, Rate: a.Rate, Baseline: a.Baseline,
		Floor: a.Floor, Top: []control.TopReply{}}
	if a.Reason == flood.ReasonShare {
		out.Kind, out.Key, out.Share = a.Kind.String(), a.Key, a.Share
	}
	for _, v := range a.Top {
		out.Top = append(out.Top, *TopReply(v, flood.AlarmWindow))
	}
	return out
}

// StatusOf is the flood alarms in the status: the alarms raised and
// the top talkers (clients, names) of the short window of each source
// that counted queries, apart; nil when p is (queries are not counted).
func StatusOf(p *flood.Pipeline) *control.FloodStatus {
	if p == nil {
		return nil
	}
	cfg := p.Config()
	st := &control.FloodStatus{On: true, Window: cfg.Tracker.Short.String(), Alarms: []control.FloodAlarm{}}
	for _, a := range p.Active() {
		st.Alarms = append(st.Alarms, StatusAlarm(a))
	}
	for _, s := range p.Sources() {
		for _, k := range []flood.Kind{flood.KindClient, flood.KindName} {
			st.Top = append(st.Top, *TopReply(p.Top(s, k, cfg.Tracker.Short, cfg.Top), cfg.Tracker.Short))
		}
	}
	return st
}

// ConfigOf is the flood pipeline's configuration from [flood]: the
// GSLB zones are the suffixes' zones.
func ConfigOf(cfg *configs.Config) flood.Config {
	f := cfg.Flood
	zones := make([]string, 0, len(cfg.GSLB.Zones))
	for _, z := range cfg.GSLB.Zones {
		zones = append(zones, z.Name)
	}
	var kinds []flood.Kind
	for _, k := range f.ShareKinds {
		if kind, err := flood.ParseKind(k); err == nil {
			kinds = append(kinds, kind)
		}
	}
	return flood.Config{
		Tracker: flood.TrackerConfig{Counters: f.SummarySize, Short: f.ShortWindow.Duration, Long: f.LongWindow.Duration,
			Zones: zones, Full: sampleAbove(f.SampleAbove)},
		Alarms: flood.AlarmConfig{Floor: float64(f.Floor), Rise: float64(f.Rise), Share: float64(f.SharePercent) / 100,
			ShareKinds: kinds, Baseline: f.Baseline.Duration, ClearAfter: f.ClearAfter.Duration},
		Top: f.Top,
	}
}

// sampleAbove is sample_above as flood.TrackerConfig.Full takes it: 0,
// every query, is negative there.
func sampleAbove(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
