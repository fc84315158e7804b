package flood

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Defaults of AlarmConfig.
const (
	DefaultFloor      = 1000.0
	DefaultRise       = 4.0
	DefaultShare      = 0.5
	DefaultBaseline   = 5 * time.Minute
	DefaultClearAfter = 10 * time.Second
)

// AlarmConfig says when a rate or a share raises an alarm.
type AlarmConfig struct {
	// Floor is the rate, in queries (or packets) a second, below which
	// no alarm is raised, whatever the baseline or the share.
	Floor float64
	// Rise raises a rate alarm when a source's rate is at least Rise
	// times its baseline (and above Floor).
	Rise float64
	// Share raises a share alarm when one key of a kind of ShareKinds
	// has more than this share of the short window (whose rate is above
	// Floor); 0 turns share alarms off.
	Share float64
	// ShareKinds are the kinds whose keys' shares are watched.
	ShareKinds []Kind
	// Baseline is the time constant of the exponentially weighted
	// moving average of each source's rate: its recent normal.
	Baseline time.Duration
	// ClearAfter is how long an alarm's condition must have stayed below
	// its clear level (half the raise level of a rate, 0.8 times Share
	// for a share) before the alarm clears.
	ClearAfter time.Duration
}

func (c AlarmConfig) withDefaults() AlarmConfig {
	if c.Floor <= 0 {
		c.Floor = DefaultFloor
	}
	if c.Rise <= 1 {
		c.Rise = DefaultRise
	}
	if c.Baseline <= 0 {
		c.Baseline = DefaultBaseline
	}
	if c.ClearAfter <= 0 {
		c.ClearAfter = DefaultClearAfter
	}
	return c
}

// Reason is why an alarm is raised.
type Reason string

// The reasons of alarms.
const (
	// ReasonRise: a source's rate rose over its baseline and the floor.
	ReasonRise Reason = "rise"
	// ReasonShare: one key took more than its share of a window.
	ReasonShare Reason = "share"
)

// Alarm is a raised alarm, or its clearing.
type Alarm struct {
	// ID names the alarm: the source of a rate alarm ("responder",
	// "vip web"), or "share SOURCE KIND KEY" ("share dnstap clients
	// 192.0.2.7").
	ID     string
	Reason Reason
	// Raised is set when the alarm is raised, unset when it clears.
	Raised bool
	// At is when it was raised or cleared; Since when it was raised.
	At, Since time.Time
	// Source is the rate's source (rate alarms), or the source of the
	// queries whose share raised it (share alarms: responder, dnstap).
	Source string
	// Rate is the rate that raised or cleared the alarm, Baseline the
	// source's baseline then, Floor the floor (rate alarms; Rate is
	// the window's total rate for share alarms).
	Rate, Baseline, Floor float64
	// Kind, Key and Share are the key and its share (share alarms).
	Kind  Kind
	Key   string
	Share float64
	// Top are the heaviest keys of the seconds that raised it (set by
	// Pipeline): clients, prefixes and names.
	Top []View
}

// rateState is one source's baseline and alarm.
type rateState struct {
	baseline float64
	last     float64 // the last rate taken
	seen     bool
	raised   *Alarm
	below    time.Time // when the rate last went below the clear level; zero: not below
	// standstill is set on an alarm raised over the floor from a
	// baseline whose rise level was below it (traffic starting from
	// nothing or little: a restart, a host enabled after a drain): the
	// normal was not known, so the baseline keeps learning while it is
	// raised, and the alarm clears once the rate is steady.
	standstill bool
	steady     time.Time // when the rate last came within steadyBand of the baseline (standstill); zero: not
}

// standstillLearn is the time constant of the baseline while an alarm
// raised from a standstill is up: a rate steady for about ClearAfter
// past it is the new normal.
const standstillLearn = 30 * time.Second

// steadyBand is how close to the baseline a rate must stay (a share of
// the baseline, either way) to be steady.
const steadyBand = 0.25

// shareState is one key's share alarm.
type shareState struct {
	raised *Alarm
	below  time.Time
}

// Alarms raises and clears alarms from the rates and shares it is
// given; each alarm once, cleared with hysteresis. It is pure: time is
// passed in; not safe for concurrent use.
type Alarms struct {
	cfg    AlarmConfig
	rates  map[string]*rateState
	shares map[string]*shareState
}

// NewAlarms returns alarms of cfg (zero fields take their defaults).
func NewAlarms(cfg AlarmConfig) *Alarms {
	return &Alarms{cfg: cfg.withDefaults(), rates: map[string]*rateState{}, shares: map[string]*shareState{}}
}

// Config is the configuration, with its defaults.
func (a *Alarms) Config() AlarmConfig { return a.cfg }

// Rate takes the rate of source over the second that ended at now
// (each source once a second): it returns the alarm raised or cleared,
// if any. The baseline follows the rate while no alarm is raised and
// stands still while one is, so that a long flood does not become the
// normal; it starts at the first rate taken. An alarm raised from a
// standstill (a baseline too low for its rise level to reach the floor:
// traffic starting from nothing) is the exception: the normal was not
// known, so the baseline keeps learning (time constant standstillLearn)
// and the alarm clears once the rate has stayed within steadyBand of it
// for ClearAfter.
func (a *Alarms) Rate(source string, rate float64, now time.Time) (Alarm, bool) {
	st, ok := a.rates[source]
	if !ok {
		st = &rateState{}
		a.rates[source] = st
	}
	st.last = rate
	if !st.seen {
		st.baseline, st.seen = rate, true
		return Alarm{}, false
	}
	level := max(a.cfg.Floor, a.cfg.Rise*st.baseline)
	if st.raised == nil {
		if rate >= level && rate > a.cfg.Floor { // at rise times the baseline: a flood 3 times the rest
			al := Alarm{ID: source, Reason: ReasonRise, Raised: true, At: now, Since: now, Source: source,
				Rate: rate, Baseline: st.baseline, Floor: a.cfg.Floor}
			st.raised, st.below, st.steady = &al, time.Time{}, time.Time{}
			st.standstill = a.cfg.Rise*st.baseline < a.cfg.Floor
			return al, true
		}
		alpha := 1 - math.Exp(-float64(time.Second)/float64(a.cfg.Baseline))
		st.baseline += alpha * (rate - st.baseline)
		return Alarm{}, false
	}
	if st.standstill {
		alpha := 1 - math.Exp(-float64(time.Second)/float64(standstillLearn))
		st.baseline += alpha * (rate - st.baseline)
		if math.Abs(rate-st.baseline) > steadyBand*st.baseline {
			st.steady = time.Time{}
		} else if st.steady.IsZero() {
			st.steady = now
		}
		if !st.steady.IsZero() && now.Sub(st.steady) >= a.cfg.ClearAfter {
			return st.clear(rate, now), true
		}
	}
	// Raised: the baseline stands; clear below half the level it was
	// raised at, for ClearAfter.
	clear := max(a.cfg.Floor, a.cfg.Rise*st.raised.Baseline) / 2
	if rate >= clear {
		st.below = time.Time{}
		return Alarm{}, false
	}
	if st.below.IsZero() {
		st.below = now
	}
	if now.Sub(st.below) < a.cfg.ClearAfter {
		return Alarm{}, false
	}
	return st.clear(rate, now), true
}

// clear clears st's alarm at now with rate, and returns the clearing.
func (st *rateState) clear(rate float64, now time.Time) Alarm {
	al := *st.raised
	al.Raised, al.At, al.Rate, al.Top = false, now, rate, nil
	st.raised, st.below, st.standstill, st.steady = nil, time.Time{}, false, time.Time{}
	return al
}

// Forget drops the sources for which keep is false (a VIP removed),
// with their alarms, silently.
func (a *Alarms) Forget(keep func(source string) bool) {
	for s := range a.rates {
		if !keep(s) {
			delete(a.rates, s)
		}
	}
}

// Shares takes a view of one source's queries, of one kind, over the
// window ending at now (Pipeline: ShareWindow): it returns the share
// alarms raised or cleared of that source and kind.
func (a *Alarms) Shares(v View, now time.Time) []Alarm {
	if a.cfg.Share <= 0 || !slices.Contains(a.cfg.ShareKinds, v.Kind) {
		return nil
	}
	var out []Alarm
	rate := float64(v.Queries) / v.Seconds()
	over := map[string]ViewEntry{}
	if rate > a.cfg.Floor {
		for _, e := range v.Entries {
			if e.Share > a.cfg.Share*0.8 {
				over[e.Key] = e
			}
		}
	}
	prefix := "share " + v.Source.String() + " " + v.Kind.String() + " "
	for key, e := range over {
		id := prefix + key
		st, ok := a.shares[id]
		if !ok && e.Share > a.cfg.Share {
			al := Alarm{ID: id, Reason: ReasonShare, Raised: true, At: now, Since: now, Source: v.Source.String(), Rate: rate,
				Floor: a.cfg.Floor, Kind: v.Kind, Key: key, Share: e.Share}
			a.shares[id] = &shareState{raised: &al}
			out = append(out, al)
		} else if ok {
			st.below = time.Time{}
		}
	}
	for id, st := range a.shares {
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		if _, still := over[st.raised.Key]; still {
			continue
		}
		if st.below.IsZero() {
			st.below = now
		}
		if now.Sub(st.below) < a.cfg.ClearAfter {
			continue
		}
		al := *st.raised
		al.Raised, al.At, al.Rate, al.Top = false, now, rate, nil
		if e, ok := v.find(st.raised.Key); ok {
			al.Share = e.Share
		} else {
			al.Share = 0
		}
		delete(a.shares, id)
		out = append(out, al)
	}
	slices.SortFunc(out, func(x, y Alarm) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// find is the entry of key, if the view has it.
func (v View) find(key string) (ViewEntry, bool) {
	for _, e := range v.Entries {
		if e.Key == key {
			return e, true
		}
	}
	return ViewEntry{}, false
}

// Active are the alarms raised now, by ID.
func (a *Alarms) Active() []Alarm {
	var out []Alarm
	for _, st := range a.rates {
		if st.raised != nil {
			out = append(out, *st.raised)
		}
	}
	for _, st := range a.shares {
		out = append(out, *st.raised)
	}
	slices.SortFunc(out, func(x, y Alarm) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// setTop attaches top to the raised alarm of id (so Active shows it).
func (a *Alarms) setTop(id string, top []View) {
	if st, ok := a.rates[id]; ok && st.raised != nil {
		st.raised.Top = top
	}
	if st, ok := a.shares[id]; ok {
		st.raised.Top = top
	}
}

// SourceRate is a source's last rate and its baseline.
type SourceRate struct {
	Source         string
	Rate, Baseline float64
	// Raised is set while its rate alarm is raised.
	Raised bool
}

// Rates are the sources' last rates and baselines, by source.
func (a *Alarms) Rates() []SourceRate {
	out := make([]SourceRate, 0, len(a.rates))
	for s, st := range a.rates {
		out = append(out, SourceRate{Source: s, Rate: st.last, Baseline: st.baseline, Raised: st.raised != nil})
	}
	slices.SortFunc(out, func(x, y SourceRate) int { return strings.Compare(x.Source, y.Source) })
	return out
}

// SetConfig changes the configuration (a reload): the baselines and
// the alarms raised stay.
func (a *Alarms) SetConfig(cfg AlarmConfig) { a.cfg = cfg.withDefaults() }
