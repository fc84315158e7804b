// Package alarms is the flood alarms component ([flood], [actions]
// auto actions, lbctl top): the pipeline the responder's readers and the
// dnstap intake count queries into, the goroutine that drains it, closes
// its epochs every second with the VIPs' packet rates and journals the
// alarms, the automatic TTL raise and client limit an alarm may take,
// and the top view. The counting itself is package flood's.
package alarms

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/flood"
	"lbdns/hub"
)

// tick is how often the component drains the readers' batches (and
// sooner when one is full) and looks for a second gone by.
const tick = 100 * time.Millisecond

// AutoBy is who an automatic action is set by.
const AutoBy = "lbdnsd (flood alarm)"

// Journal is where the component says what happened.
type Journal interface {
	// FloodAlarm: an alarm raised or cleared.
	FloodAlarm(a flood.Alarm)
	// AutoLimitRefused: an automatic limit of client that the intent
	// refused.
	AutoLimitRefused(alarm, client string, err error)
}

// GSLB takes the automatic TTL raise (the GSLB requests' path).
type GSLB interface {
	SetGSLB(ctx context.Context, req control.GSLBRequest, by string) (*control.GSLBReply, error)
}

// Clients takes the automatic limit (the client requests' path).
type Clients interface {
	SetClient(ctx context.Context, req control.ClientRequest, by string) (*control.ClientReply, error)
}

// Options configure a Part.
type Options struct {
	// Config is the configuration at start: [flood] enabled and the
	// summaries' sizes and windows (a restart changes them).
	Config *configs.Config
	// Hub is where the configuration and the intent in force are read.
	Hub *hub.Hub
	// Rates, when set, reads the VIPs' packet rates by VIP name (the
	// cheap trigger; at most once a second). Nil: none.
	Rates func(ctx context.Context) map[string]float64
	// GSLB and Clients take the automatic actions.
	GSLB    GSLB
	Clients Clients
	// Journal hears the alarms.
	Journal Journal
	// Registerer receives the metrics. Nil: none.
	Registerer prometheus.Registerer
	// Logger receives the logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Part is the flood alarms component; nil when [flood] is off at start
// (its methods are then those of a component that counts nothing).
type Part struct {
	o Options
	p *flood.Pipeline
}

// New returns the component of o.Config, its metrics registered; nil
// when [flood] is off.
func New(o Options) (*Part, error) {
	if !o.Config.Flood.Enabled {
		return nil, nil
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	f := &Part{o: o, p: flood.NewPipeline(ConfigOf(o.Config), o.Now())}
	if o.Registerer != nil {
		if err := o.Registerer.Register(flood.NewMetrics(f.p)); err != nil {
			return nil, fmt.Errorf("flood metrics: %w", err)
		}
	}
	return f, nil
}

// Pipeline is the component's pipeline, nil when off: inputs of queries
// feed it with Observe or a Producer of their own.
func (f *Part) Pipeline() *flood.Pipeline {
	if f == nil {
		return nil
	}
	return f.p
}

// Check refuses nothing: every [flood] table that the configuration's
// validation passed can be applied (the summaries keep their size and
// windows until a restart).
func (f *Part) Check(*configs.Config) error { return nil }

// Apply applies a reload's [flood] alarms.
func (f *Part) Apply(cfg *configs.Config) {
	if f == nil {
		return
	}
	fc := ConfigOf(cfg)
	f.p.SetAlarms(fc.Alarms, fc.Top)
}

// Run drains and steps the pipeline until ctx is done; the returned
// channel is closed when it has stopped.
func (f *Part) Run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if f == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		t := time.NewTicker(tick)
		defer t.Stop()
		last := f.o.Now().Truncate(flood.Epoch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.p.Wake():
				f.p.Drain()
			case <-t.C:
				now := f.o.Now()
				if now.Truncate(flood.Epoch).Equal(last) {
					f.p.Drain()
					continue
				}
				last = now.Truncate(flood.Epoch)
				f.step(ctx, now)
			}
		}
	}()
	return done
}

// step closes the epochs that ended by now, with the VIPs' packet rates,
// and journals every alarm raised or cleared.
func (f *Part) step(ctx context.Context, now time.Time) {
	var rates map[string]float64
	if f.o.Rates != nil {
		rates = f.o.Rates(ctx)
	}
	for _, a := range f.p.Step(now, rates) {
		f.o.Journal.FloodAlarm(a)
		if a.Raised {
			f.autoTTLRaise(ctx, a)
			f.autoLimit(ctx, a)
		}
	}
}

// config is the configuration in force.
func (f *Part) config() *configs.Config { c, _ := f.o.Hub.Config.Load(); return c }

// autoTTLRaise raises the TTL of the alarm's heaviest name when
// [flood] auto_ttl_raise says so and that name is a GSLB name with at
// least half of the queries of the seconds that raised the alarm: a TTL
// raise of the operator intent (persisted, shown and journaled as every
// raise), left for an operator to clear.
func (f *Part) autoTTLRaise(ctx context.Context, a flood.Alarm) {
	cfg := f.config()
	secs := cfg.Flood.AutoTTLRaise
	if secs == 0 {
		return
	}
	var top flood.ViewEntry
	for _, v := range a.Top {
		if v.Kind == flood.KindName && len(v.Entries) > 0 {
			top = v.Entries[0]
		}
	}
	if top.Share < 0.5 || !isGSLBName(cfg, top.Key) {
		f.o.Logger.Info("flood alarm: no automatic TTL raise: no GSLB name has half of the queries", "alarm", a.ID, "top_name", top.Key, "share", top.Share)
		return
	}
	reason := fmt.Sprintf("flood alarm %s: %s at %.0f/s, %.0f%% of the queries ([flood] auto_ttl_raise)", a.ID, top.Key, top.Rate, 100*top.Share)
	if _, err := f.o.GSLB.SetGSLB(ctx, control.GSLBRequest{Action: "ttl", Name: top.Key, Seconds: secs, Reason: reason}, AutoBy); err != nil {
		f.o.Logger.Warn("flood alarm: automatic TTL raise failed", "alarm", a.ID, "name", top.Key, "err", err)
	}
}

// autoLimit limits the alarm's top client address, or else its top
// client prefix, when [actions] enabled says so and that client has at
// least auto_share_percent of the queries of the seconds that raised
// the alarm: a limit (never a block: the client may be a NAT gateway or
// a shared resolver) at default_limit_qps for auto_for, set through the
// operator intent (persisted, shown, journaled by AutoBy) and ending on
// its own. Nothing is set when an action already covers the client or
// overlaps it; a limit the intent refuses (an allowlisted, protected or
// configured network, too many entries) is a warning and an event, once
// for the alarm (each alarm is raised once).
func (f *Part) autoLimit(ctx context.Context, a flood.Alarm) {
	act := f.config().Actions
	if !act.Enabled {
		return
	}
	top, ok := autoClient(a, float64(act.AutoSharePercent)/100)
	if !ok {
		f.o.Logger.Info("flood alarm: no automatic limit: no client or client prefix has the share", "alarm", a.ID, "auto_share_percent", act.AutoSharePercent)
		return
	}
	p, err := configs.ParseClient(top.Key)
	if err != nil {
		f.o.Journal.AutoLimitRefused(a.ID, top.Key, err)
		return
	}
	in, _ := f.o.Hub.Intent.Load()
	for _, c := range in.State.ClientsAt(f.o.Now()) {
		if c.Client.Overlaps(p) {
			f.o.Logger.Info("flood alarm: no automatic limit: an action already covers the client", "alarm", a.ID, "client", top.Key, "action", c.Text(), "by", c.By)
			return
		}
	}
	reason := fmt.Sprintf("flood alarm %s: %s at %.0f/s, %.0f%% of the queries ([actions] enabled)", a.ID, top.Key, top.Rate, 100*top.Share)
	req := control.ClientRequest{Action: control.ClientLimit, Client: top.Key, ForSeconds: int64(act.AutoFor.Duration / time.Second), Reason: reason}
	if _, err := f.o.Clients.SetClient(ctx, req, AutoBy); err != nil {
		f.o.Journal.AutoLimitRefused(a.ID, top.Key, err)
	}
}

// autoClient is the alarm's top client address with at least share of
// the queries, else its top client prefix with that share.
func autoClient(a flood.Alarm, share float64) (flood.ViewEntry, bool) {
	for _, k := range []flood.Kind{flood.KindClient, flood.KindPrefix} {
		for _, v := range a.Top {
			if v.Kind == k && len(v.Entries) > 0 && v.Entries[0].Share >= share {
				return v.Entries[0], true
			}
		}
	}
	return flood.ViewEntry{}, false
}

// isGSLBName reports whether name (lower-cased, fully qualified) is a
// [[gslb.name]] of cfg.
func isGSLBName(cfg *configs.Config, name string) bool {
	for i := range cfg.GSLB.Names {
		n := &cfg.GSLB.Names[i]
		fq := n.FQDN
		if fq == "" {
			fq = strings.ToLower(strings.TrimSuffix(n.Name, ".")) + "."
		}
		if fq == name {
			return true
		}
	}
	return false
}

// Top answers GET /v1/top (control.TopBackend): window 0 is the short
// window; beyond the long window, a malformed request.
func (f *Part) Top(_ context.Context, source, kind string, window time.Duration) (*control.TopReply, error) {
	p := f.Pipeline()
	if p == nil {
		return nil, control.Errorf(control.Unavailable, "queries are not counted: [flood] enabled = false (a restart applies it)")
	}
	k, err := flood.ParseKind(kind)
	if err != nil {
		return nil, control.Errorf(control.Malformed, "%v", err)
	}
	src, err := flood.ParseSource(source)
	if err != nil {
		return nil, control.Errorf(control.Malformed, "%v", err)
	}
	cfg := p.Config()
	if window == 0 {
		window = cfg.Tracker.Short
	}
	if window > cfg.Tracker.Long {
		return nil, control.Errorf(control.Malformed, "window %s: at most %s is kept (flood.long_window)", window, cfg.Tracker.Long)
	}
	return TopReply(p.Top(src, k, window, 0), window), nil
}

// Status is the flood section of /status.
func (f *Part) Status() *control.FloodStatus { return StatusOf(f.Pipeline()) }
