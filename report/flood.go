package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/flood"
	"lbdns/vip"
)

// TopReply is a flood view as GET /v1/top answers it; window is the
// window asked for.
func TopReply(v flood.View, window time.Duration) *control.TopReply {
	secs := v.Seconds()
	rep := &control.TopReply{Kind: v.Kind.String(), Window: window.String(), Start: v.Start, End: v.End,
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

// FloodAlarm is a raised alarm as the status shows it.
func FloodAlarm(a flood.Alarm) control.FloodAlarm {
	out := control.FloodAlarm{ID: a.ID, Reason: string(a.Reason), Since: a.Since, Rate: a.Rate, Baseline: a.Baseline,
		Floor: a.Floor, Top: []control.TopReply{}}
	if a.Reason == flood.ReasonShare {
		out.Kind, out.Key, out.Share = a.Kind.String(), a.Key, a.Share
	}
	for _, v := range a.Top {
		out.Top = append(out.Top, *TopReply(v, flood.AlarmWindow))
	}
	return out
}

// FloodStatus is the flood alarms in the status: the alarms raised and
// the top talkers (clients, names) of the short window; nil when p is
// (queries are not counted).
func FloodStatus(p *flood.Pipeline) *control.FloodStatus {
	if p == nil {
		return nil
	}
	cfg := p.Config()
	st := &control.FloodStatus{On: true, Window: cfg.Tracker.Short.String(), Alarms: []control.FloodAlarm{}}
	for _, a := range p.Active() {
		st.Alarms = append(st.Alarms, FloodAlarm(a))
	}
	for _, k := range []flood.Kind{flood.KindClient, flood.KindName} {
		st.Top = append(st.Top, *TopReply(p.Top(k, cfg.Tracker.Short, cfg.Top), cfg.Tracker.Short))
	}
	return st
}

// floodTopText is a view's heaviest keys in one line: "203.0.113.66
// 4000/s (±12) 92%, ...".
func floodTopText(v flood.View) string {
	if len(v.Entries) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(v.Entries))
	for _, e := range v.Entries {
		parts = append(parts, fmt.Sprintf("%s %.0f/s (-%.0f) %.0f%%", e.Key, e.Rate, e.RateError, 100*e.Share))
	}
	return strings.Join(parts, ", ")
}

// floodSubject is what an alarm is about, for its event.
func floodSubject(a flood.Alarm) string {
	if a.Reason == flood.ReasonShare {
		return a.Kind.String() + " " + a.Key
	}
	return a.Source
}

// FloodAlarm tells a flood alarm raised (a warning, once: an event
// naming the top clients, prefixes and names with their estimated rates
// and errors) or cleared (an info line and an event).
func (j *Journal) FloodAlarm(a flood.Alarm) {
	var what string
	switch a.Reason {
	case flood.ReasonShare:
		what = fmt.Sprintf("%s %s has %.0f%% of the queries (%.0f/s in all, floor %.0f/s)", a.Kind.Singular(), a.Key, 100*a.Share, a.Rate, a.Floor)
	default:
		what = fmt.Sprintf("%s at %.0f/s, baseline %.0f/s (floor %.0f/s)", a.Source, a.Rate, a.Baseline, a.Floor)
	}
	if !a.Raised {
		msg := "flood alarm cleared: " + what + fmt.Sprintf(", raised %s ago", a.At.Sub(a.Since).Round(time.Second))
		j.log.Info(msg, "alarm", a.ID, "reason", string(a.Reason))
		j.event(control.Event{Kind: control.EventFlood, Subject: floodSubject(a), Message: msg})
		return
	}
	tops := map[flood.Kind]string{}
	for _, v := range a.Top {
		tops[v.Kind] = floodTopText(v)
	}
	msg := fmt.Sprintf("flood alarm: %s; top clients: %s; prefixes: %s; names: %s", what,
		tops[flood.KindClient], tops[flood.KindPrefix], tops[flood.KindName])
	j.log.Warn("flood alarm: "+what, "alarm", a.ID, "reason", string(a.Reason),
		"clients", tops[flood.KindClient], "prefixes", tops[flood.KindPrefix], "names", tops[flood.KindName])
	j.event(control.Event{Kind: control.EventFlood, Subject: floodSubject(a), Message: msg, Error: true})
}

// VIPPacketRates are each VIP's incoming packets a second, the sum of
// the kernel's rate estimates of its destinations over its services, by
// "vip NAME" (the flood alarms' sources); nil without statistics.
func VIPPacketRates(cfg *configs.Config, stats Stats) map[string]float64 {
	if cfg == nil || stats == nil {
		return nil
	}
	out := make(map[string]float64, len(cfg.VIPs))
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		var sum uint64
		for _, k := range vip.ServiceKeys(v) {
			for _, s := range stats[k] {
				sum += s.PPSIn
			}
		}
		out["vip "+v.Name] = float64(sum)
	}
	return out
}

// FloodConfig is the flood pipeline's configuration from [flood]: the
// GSLB zones are the suffixes' zones.
func FloodConfig(cfg *configs.Config) flood.Config {
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
