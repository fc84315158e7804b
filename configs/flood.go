package configs

import (
	"fmt"
	"strconv"
	"time"
)

// Flood is the flood alarms ([flood]): heavy hitters of the queries
// lbdnsd sees (the GSLB responder's, and those fed to it), and alarms
// when a rate rises over its baseline or one client takes a large share.
type Flood struct {
	// Enabled counts queries and raises alarms. Default true.
	Enabled bool `toml:"enabled"`
	// Floor is the rate, in queries (or, for a VIP, packets) a second,
	// below which no alarm is raised, 1..100000000. Default 1000.
	Floor int `toml:"floor"`
	// Rise raises an alarm when a rate (the responder's queries, a
	// VIP's packets from IPVS) is above Rise times its baseline and
	// above Floor, 2..1000. Default 4.
	Rise int `toml:"rise"`
	// SharePercent raises an alarm when one key of a kind of ShareKinds
	// has more than this share of the short window, whose rate is above
	// Floor, 0..100; 0 turns share alarms off. Default 50.
	SharePercent int `toml:"share_percent"`
	// ShareKinds are the kinds whose keys' shares are watched: clients,
	// prefixes, names, suffixes, nametypes. Default ["clients", "prefixes"].
	ShareKinds []string `toml:"share_kinds"`
	// Baseline is the time constant of each rate's moving average (its
	// recent normal), 10s..1h. Default 5m.
	Baseline Duration `toml:"baseline"`
	// ClearAfter is how long an alarm's condition must stay under its
	// clear level before it clears, 1s..10m. Default 10s.
	ClearAfter Duration `toml:"clear_after"`
	// ShortWindow is the short view (lbctl top's default, the share
	// alarms'), whole seconds, 2s..30s. Default 10s.
	ShortWindow Duration `toml:"short_window"`
	// LongWindow is the longest view, a whole number of short windows,
	// at most 5m. Default 60s.
	LongWindow Duration `toml:"long_window"`
	// SummarySize is the counters of each summary (m), 16..960: the
	// error of an estimate is at most the queries of the view divided by
	// it; the summaries take at most about 17 KiB per counter with the
	// default windows (8.5 MiB at 512 with every name 250 octets long).
	// Default 512.
	SummarySize int `toml:"summary_size"`
	// Top is how many keys of each kind an alarm, the metrics and the
	// page name, 1..20. Default 5.
	Top int `toml:"top"`
	// SampleAbove is how many queries a second are counted one by one in
	// the summaries; beyond, each is counted with probability 1/k and
	// weight k (the totals still count every one), 1000..10000000, or 0
	// to count every query whatever the rate. Default 20000.
	SampleAbove int `toml:"sample_above"`
	// AutoTTLRaise, when not 0, raises the TTL of a GSLB name to at
	// least this many seconds when an alarm is raised whose heaviest
	// name is that GSLB name with at least half of the queries (a TTL
	// raise of the operator intent, by "lbdnsd (flood alarm)", until an
	// operator clears it), 0 or 1..86400. Default 0: no automatic
	// action.
	AutoTTLRaise int `toml:"auto_ttl_raise"`
}

// Defaults and limits of [flood].
const (
	DefaultFloodFloor        = 1000
	MaxFloodFloor            = 100000000
	DefaultFloodRise         = 4
	MaxFloodRise             = 1000
	DefaultFloodSharePercent = 50
	DefaultFloodBaseline     = 5 * time.Minute
	MinFloodBaseline         = 10 * time.Second
	MaxFloodBaseline         = time.Hour
	DefaultFloodClearAfter   = 10 * time.Second
	MaxFloodClearAfter       = 10 * time.Minute
	DefaultFloodShortWindow  = 10 * time.Second
	MinFloodShortWindow      = 2 * time.Second
	MaxFloodShortWindow      = 30 * time.Second
	DefaultFloodLongWindow   = time.Minute
	MaxFloodLongWindow       = 5 * time.Minute
	DefaultFloodSummarySize  = 512
	MinFloodSummarySize      = 16
	MaxFloodSummarySize      = 960
	DefaultFloodTop          = 5
	MaxFloodTop              = 20
	MaxFloodAutoTTLRaise     = 86400
	DefaultFloodSampleAbove  = 20000
	MinFloodSampleAbove      = 1000
	MaxFloodSampleAbove      = 10000000
)

// FloodKinds are the kinds of key share_kinds takes.
func FloodKinds() []string { return []string{"clients", "prefixes", "names", "suffixes", "nametypes"} }

// validateFlood applies the defaults of [flood] and checks it.
func (d *decoder) validateFlood() {
	f, raw := &d.cfg.Flood, d.floodRaw
	if !hasKey(raw, "enabled") {
		f.Enabled = true
	}
	ints := []struct {
		key      string
		v        *int
		def      int
		min, max int
	}{
		{"floor", &f.Floor, DefaultFloodFloor, 1, MaxFloodFloor},
		{"rise", &f.Rise, DefaultFloodRise, 2, MaxFloodRise},
		{"share_percent", &f.SharePercent, DefaultFloodSharePercent, 0, 100},
		{"summary_size", &f.SummarySize, DefaultFloodSummarySize, MinFloodSummarySize, MaxFloodSummarySize},
		{"top", &f.Top, DefaultFloodTop, 1, MaxFloodTop},
	}
	for _, x := range ints {
		if !hasKey(raw, x.key) {
			*x.v = x.def
		}
		if *x.v < x.min || *x.v > x.max {
			d.p.add(joinKey("flood", x.key), strconv.Itoa(*x.v), fmt.Sprintf("must be between %d and %d", x.min, x.max))
		}
	}
	if !hasKey(raw, "sample_above") {
		f.SampleAbove = DefaultFloodSampleAbove
	}
	if v := f.SampleAbove; v != 0 && (v < MinFloodSampleAbove || v > MaxFloodSampleAbove) {
		d.p.add("flood.sample_above", strconv.Itoa(v), fmt.Sprintf("must be 0 (count every query) or between %d and %d", MinFloodSampleAbove, MaxFloodSampleAbove))
	}
	if v := f.AutoTTLRaise; v < 0 || v > MaxFloodAutoTTLRaise {
		d.p.add("flood.auto_ttl_raise", strconv.Itoa(v), fmt.Sprintf("must be 0 (no automatic raise) or between 1 and %d seconds", MaxFloodAutoTTLRaise))
	}
	if !hasKey(raw, "share_kinds") {
		f.ShareKinds = []string{"clients", "prefixes"}
	}
	for i, k := range f.ShareKinds {
		if !oneOf(k, FloodKinds()) {
			d.p.add(indexKey(joinKey("flood", "share_kinds"), i), k, "unknown kind (want one of "+listText(FloodKinds())+")")
		}
	}
	durs := []struct {
		key      string
		v        *Duration
		def      time.Duration
		min, max time.Duration
	}{
		{"baseline", &f.Baseline, DefaultFloodBaseline, MinFloodBaseline, MaxFloodBaseline},
		{"clear_after", &f.ClearAfter, DefaultFloodClearAfter, time.Second, MaxFloodClearAfter},
		{"short_window", &f.ShortWindow, DefaultFloodShortWindow, MinFloodShortWindow, MaxFloodShortWindow},
		{"long_window", &f.LongWindow, DefaultFloodLongWindow, MinFloodShortWindow, MaxFloodLongWindow},
	}
	bad := map[string]bool{}
	for _, x := range durs {
		if !hasKey(raw, x.key) {
			x.v.Duration = x.def
		}
		if v := x.v.Duration; v < x.min || v > x.max {
			d.p.add(joinKey("flood", x.key), fmtDur(v), "must be between "+fmtDur(x.min)+" and "+fmtDur(x.max))
			bad[x.key] = true
		}
	}
	if s := f.ShortWindow.Duration; !bad["short_window"] && s%time.Second != 0 {
		d.p.add("flood.short_window", fmtDur(s), "must be whole seconds")
	} else if l := f.LongWindow.Duration; !bad["short_window"] && !bad["long_window"] && (l < s || l%s != 0) {
		d.p.add("flood.long_window", fmtDur(l), "must be a whole number of short windows ("+fmtDur(s)+")")
	}
}
