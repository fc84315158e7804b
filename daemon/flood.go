package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/flood"
	"lbdns/report"
)

// floodTick is how often the flood part drains the responder's batches
// (and sooner when one is full) and looks for a second gone by.
const floodTick = 100 * time.Millisecond

// floodPart is the flood alarms: the pipeline the responder's readers
// (and any other input: Pipeline.Observe) count queries into, and the
// goroutine that drains it, closes its epochs every second, reads the
// VIPs' packet rates from IPVS and journals the alarms. Nil when
// [flood] is off at start (a restart turns it on).
type floodPart struct {
	p *flood.Pipeline
}

// newFlood builds the flood part of cfg ([flood]), its metrics
// registered; nil when it is off.
func newFlood(d *Daemon, cfg *configs.Config) *floodPart {
	if !cfg.Flood.Enabled {
		return nil
	}
	f := &floodPart{p: flood.NewPipeline(report.FloodConfig(cfg), d.now())}
	d.registry.MustRegister(flood.NewMetrics(f.p))
	return f
}

// pipeline is the part's pipeline, nil when off.
func (f *floodPart) pipeline() *flood.Pipeline {
	if f == nil {
		return nil
	}
	return f.p
}

// Flood returns the flood pipeline (nil when [flood] is off): other
// inputs of queries (a dnstap reader) feed it with Observe or a
// Producer of their own.
func (d *Daemon) Flood() *flood.Pipeline { return d.flood.pipeline() }

// configure applies a reload's [flood] alarms (the summaries keep their
// size and windows until a restart).
func (f *floodPart) configure(cfg *configs.Config) {
	if f == nil {
		return
	}
	fc := report.FloodConfig(cfg)
	f.p.SetAlarms(fc.Alarms, fc.Top)
}

// runFlood drains and steps the pipeline until ctx is done; the
// returned channel is closed when it has stopped.
func (d *Daemon) runFlood(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	f := d.flood
	if f == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(floodTick)
		defer tick.Stop()
		last := d.now().Truncate(flood.Epoch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.p.Wake():
				f.p.Drain()
			case <-tick.C:
				now := d.now()
				if now.Truncate(flood.Epoch).Equal(last) {
					f.p.Drain()
					continue
				}
				last = now.Truncate(flood.Epoch)
				d.stepFlood(ctx, now)
			}
		}
	}()
	return done
}

// stepFlood closes the epochs that ended by now, with the VIPs' packet
// rates (IPVS, the cheap trigger: read at most once a second), and
// journals every alarm raised or cleared.
func (d *Daemon) stepFlood(ctx context.Context, now time.Time) {
	var rates map[string]float64
	if !d.noIPVS {
		rates = report.VIPPacketRates(d.Config(), d.stats.Read(ctx, d.rec.Snapshot().Table))
	}
	for _, a := range d.flood.p.Step(now, rates) {
		d.journal.FloodAlarm(a)
		if a.Raised {
			d.autoTTLRaise(ctx, a)
			d.autoLimit(ctx, a)
		}
	}
}

// autoFloodBy is who an automatic TTL raise is set by.
const autoFloodBy = "lbdnsd (flood alarm)"

// autoTTLRaise raises the TTL of the alarm's heaviest name when
// [flood] auto_ttl_raise says so and that name is a GSLB name with at
// least half of the queries of the seconds that raised the alarm: a TTL
// raise of the operator intent (persisted, shown and journaled as every
// raise), left for an operator to clear.
func (d *Daemon) autoTTLRaise(ctx context.Context, a flood.Alarm) {
	cfg := d.Config()
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
		d.log.Info("flood alarm: no automatic TTL raise: no GSLB name has half of the queries", "alarm", a.ID, "top_name", top.Key, "share", top.Share)
		return
	}
	reason := fmt.Sprintf("flood alarm %s: %s at %.0f/s, %.0f%% of the queries ([flood] auto_ttl_raise)", a.ID, top.Key, top.Rate, 100*top.Share)
	if _, err := d.Change(ctx, d.gslbChange(control.GSLBRequest{Action: "ttl", Name: top.Key, Seconds: secs, Reason: reason}, autoFloodBy)); err != nil {
		d.log.Warn("flood alarm: automatic TTL raise failed", "alarm", a.ID, "name", top.Key, "err", err)
	}
}

// autoLimit limits the alarm's top client address, or else its top
// client prefix, when [actions] enabled says so and that client has at
// least auto_share_percent of the queries of the seconds that raised
// the alarm: a limit (never a block: the client may be a NAT gateway or
// a shared resolver) at default_limit_qps for auto_for, set through the
// operator intent (persisted, shown, journaled by "lbdnsd (flood
// alarm)") and ending on its own. Nothing is set when an action already
// covers the client or overlaps it; a limit the intent refuses (an
// allowlisted, protected or configured network, too many entries) is a
// warning and an event, once for the alarm (each alarm is raised once).
func (d *Daemon) autoLimit(ctx context.Context, a flood.Alarm) {
	act := d.Config().Actions
	if !act.Enabled {
		return
	}
	top, ok := autoClient(a, float64(act.AutoSharePercent)/100)
	if !ok {
		d.log.Info("flood alarm: no automatic limit: no client or client prefix has the share", "alarm", a.ID, "auto_share_percent", act.AutoSharePercent)
		return
	}
	p, err := configs.ParseClient(top.Key)
	if err != nil {
		d.journal.AutoLimitRefused(a.ID, top.Key, err)
		return
	}
	for _, c := range d.intentNow().ClientsAt(d.now()) {
		if c.Client.Overlaps(p) {
			d.log.Info("flood alarm: no automatic limit: an action already covers the client", "alarm", a.ID, "client", top.Key, "action", c.Text(), "by", c.By)
			return
		}
	}
	reason := fmt.Sprintf("flood alarm %s: %s at %.0f/s, %.0f%% of the queries ([actions] enabled)", a.ID, top.Key, top.Rate, 100*top.Share)
	req := control.ClientRequest{Action: control.ClientLimit, Client: top.Key, ForSeconds: int64(act.AutoFor.Duration / time.Second), Reason: reason}
	if _, err := d.clients.SetClient(ctx, req, autoFloodBy); err != nil {
		d.journal.AutoLimitRefused(a.ID, top.Key, err)
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
// window; beyond the long window, 400.
func (b backend) Top(_ context.Context, kind string, window time.Duration) (*control.TopReply, error) {
	p := b.d.flood.pipeline()
	if p == nil {
		return nil, control.Errorf(control.Unavailable, "queries are not counted: [flood] enabled = false (a restart applies it)")
	}
	k, err := flood.ParseKind(kind)
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
	return report.TopReply(p.Top(k, window, 0), window), nil
}

var _ control.TopBackend = backend{}
