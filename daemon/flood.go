package daemon

import (
	"context"
	"net/http"
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
	}
}

// Top answers GET /v1/top (control.TopBackend): window 0 is the short
// window; beyond the long window, 400.
func (b backend) Top(_ context.Context, kind string, window time.Duration) (*control.TopReply, error) {
	p := b.d.flood.pipeline()
	if p == nil {
		return nil, control.Errorf(http.StatusServiceUnavailable, "queries are not counted: [flood] enabled = false (a restart applies it)")
	}
	k, err := flood.ParseKind(kind)
	if err != nil {
		return nil, control.Errorf(http.StatusBadRequest, "%v", err)
	}
	cfg := p.Config()
	if window == 0 {
		window = cfg.Tracker.Short
	}
	if window > cfg.Tracker.Long {
		return nil, control.Errorf(http.StatusBadRequest, "window %s: at most %s is kept (flood.long_window)", window, cfg.Tracker.Long)
	}
	return report.TopReply(p.Top(k, window, 0), window), nil
}

var _ control.TopBackend = backend{}
