package report

import (
	"fmt"
	"strings"

	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/flood"
	"lbdns/vip"
)

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

// floodSourceWords names a source of queries in an alarm's words.
func floodSourceWords(source string) string {
	switch source {
	case flood.SourceResponder.String():
		return "responder's"
	case flood.SourceDnstap.String():
		return "resolvers' (dnstap)"
	}
	return source
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
		what = fmt.Sprintf("%s %s has %.0f%% of the %s queries of the last %s (%.0f/s in all, floor %.0f/s)", a.Kind.Singular(), a.Key, 100*a.Share,
			floodSourceWords(a.Source), flood.ShareWindow, a.Rate, a.Floor)
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
	seen := ""
	for _, v := range a.Top {
		tops[v.Kind] = floodTopText(v)
		seen = v.Source.String()
	}
	msg := fmt.Sprintf("flood alarm: %s; over the last %s, of the %s queries, top clients: %s; prefixes: %s; names: %s", what, flood.AlarmWindow,
		floodSourceWords(seen), tops[flood.KindClient], tops[flood.KindPrefix], tops[flood.KindName])
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
