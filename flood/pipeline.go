package flood

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Config is a Pipeline's configuration.
type Config struct {
	Tracker TrackerConfig
	Alarms  AlarmConfig
	// Top is how many keys of each kind an alarm names. Default 5.
	Top int
}

// AlarmWindow is the time an alarm's Top covers: the last seconds, the
// ones that raised it.
const AlarmWindow = 2 * Epoch

// ShareWindow is the window a share alarm is decided on, its floor
// included: the last second, so that a flood is named within two
// seconds of its start whatever the short window (which lbctl top and
// the status show). A flood of 3 times the background is over half of
// the second after its start when it began in the first half of it,
// else of the one after that; a window of two seconds would hold a
// second of background too, whose rate can keep the pair under the
// floor until the flood's second full second.
const ShareWindow = Epoch

// Pipeline is the one way in for every input (the responder's readers,
// dnstap, anything else that sees queries) and the one place the heavy
// hitters and alarms are kept: an Intake drained into a Tracker per
// source (the responder's queries and those the resolvers' dnstap
// reports are counted apart, so that a flood one of them sees is never
// named from the other's queries), and Alarms over the rates and
// shares. Inputs either take a Producer of their own (one per goroutine
// that records: the cheapest way, a lock nobody else takes but the
// drainer) or call Observe. Step drains, rotates the epochs and
// evaluates the alarms; the caller runs it (and Drain when Wake has a
// value) from one goroutine. Every method is safe to call from any
// goroutine.
type Pipeline struct {
	intake *Intake
	top    int

	mu sync.Mutex
	// trackers count each source's queries; one is made at its first
	// query (the responder's at the start).
	trackers [numSources]*Tracker
	alarms   *Alarms
	inputs   map[Source]*Producer
	// totals count the queries of the closed epochs by source; raised
	// the alarms raised by reason.
	totals [numSources]uint64
	raised map[Reason]uint64
	// seen marks the sources that counted a query.
	seen [numSources]bool
}

// NewPipeline returns a pipeline of cfg whose first epoch starts at now.
func NewPipeline(cfg Config, now time.Time) *Pipeline {
	if cfg.Top <= 0 {
		cfg.Top = 5
	}
	p := &Pipeline{intake: NewIntake(), top: cfg.Top, alarms: NewAlarms(cfg.Alarms), inputs: map[Source]*Producer{}, raised: map[Reason]uint64{}}
	t := NewTracker(cfg.Tracker, now)
	t.source = SourceResponder
	p.trackers[SourceResponder] = t
	return p
}

// tracker is source's tracker, made now when it has none (p.mu held):
// its epochs are the responder's.
func (p *Pipeline) tracker(s Source) *Tracker {
	if t := p.trackers[s]; t != nil {
		return t
	}
	r := p.trackers[SourceResponder]
	t := NewTracker(r.cfg, r.cur.start)
	t.source = s
	p.trackers[s] = t
	return t
}

// Producer returns a new producer of queries from source (close it when
// done): give one to each goroutine that records queries.
func (p *Pipeline) Producer(source Source) *Producer { return p.intake.NewProducer(source) }

// Observe records q, from q.Source, for inputs that do not keep a
// Producer (a dnstap reader converts each CLIENT_QUERY or
// CLIENT_RESPONSE message to a Query and calls it). It is safe for
// concurrent use; callers that record from many goroutines at high
// rates are better off with a Producer each.
func (p *Pipeline) Observe(q Query) {
	p.mu.Lock()
	pr, ok := p.inputs[q.Source]
	if !ok {
		pr = p.intake.NewProducer(q.Source)
		p.inputs[q.Source] = pr
	}
	p.mu.Unlock()
	pr.Add(q)
}

// Wake has a value when a producer's batch is full: Drain it then.
func (p *Pipeline) Wake() <-chan struct{} { return p.intake.Wake() }

// Drain counts what the producers recorded into the current epoch.
func (p *Pipeline) Drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drain()
}

// drain is Drain with p.mu held: each record is counted by its
// source's tracker, and the queries seen but not recorded (no batch was
// free) are added to that tracker's totals.
func (p *Pipeline) drain() {
	var before [numSources]uint64
	for s, t := range p.trackers {
		if t != nil {
			before[s] = t.cur.sources[s]
		}
	}
	seen := p.intake.Drain(func(b *batch) {
		var has [numSources]bool
		for i := range b.recs {
			if s := b.recs[i].source; s < numSources {
				has[s] = true
			}
		}
		for s := range numSources {
			if has[s] {
				p.tracker(s).addBatchOf(b, s)
			}
		}
	})
	for s, n := range seen {
		if n == 0 {
			continue
		}
		cur := p.tracker(Source(s)).cur
		if got := cur.sources[s] - before[s]; n > got {
			cur.sources[s] += n - got
			cur.total += n - got
		}
	}
}

// Step drains, closes the epochs that ended by now, and takes each
// closed epoch's rate of every source of queries, then (once a second)
// rates, the other sources' rates (a VIP's packets a second from IPVS:
// "vip NAME"), and the shares of each source's last ShareWindow. It
// returns the alarms raised (with their Top: the views of the source
// that raised it; a VIP's, the resolvers' dnstap, which sees the queries
// its packets carry) and cleared.
func (p *Pipeline) Step(now time.Time, rates map[string]float64) []Alarm {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drain()
	var closed []EpochTotal // the responder's: every epoch
	var counts [numSources]map[time.Time]uint64
	for s, t := range p.trackers {
		if t == nil {
			continue
		}
		eps := t.Rotate(now)
		if Source(s) == SourceResponder {
			closed = eps
		}
		counts[s] = make(map[time.Time]uint64, len(eps))
		for _, e := range eps {
			counts[s][e.Start] = e.Sources[s]
		}
	}
	if len(closed) == 0 {
		return nil
	}
	var out []Alarm
	for _, e := range closed {
		end := e.Start.Add(Epoch)
		for s := range numSources {
			n := counts[s][e.Start]
			p.totals[s] += n
			// A source is watched from its first query on (the
			// responder's from the start), so that its rate falling
			// to nothing is seen too.
			if n > 0 {
				p.seen[s] = true
			}
			if s != SourceResponder && !p.seen[s] {
				continue
			}
			if al, ok := p.alarms.Rate(s.String(), float64(n), end); ok {
				out = append(out, al)
			}
		}
	}
	for name, r := range rates {
		if al, ok := p.alarms.Rate(name, r, now); ok {
			out = append(out, al)
		}
	}
	p.alarms.Forget(func(s string) bool {
		if _, ok := rates[s]; ok {
			return true
		}
		for src := range numSources {
			if s == src.String() {
				return true
			}
		}
		return false
	})
	for s, t := range p.trackers {
		if t == nil || (Source(s) != SourceResponder && !p.seen[s]) {
			continue
		}
		for _, k := range p.alarms.cfg.ShareKinds {
			out = append(out, p.alarms.Shares(t.View(k, ShareWindow, p.top), now)...)
		}
	}
	slices.SortStableFunc(out, func(a, b Alarm) int { return strings.Compare(a.ID, b.ID) })
	var tops [numSources][]View
	for i := range out {
		if !out[i].Raised {
			continue
		}
		s := sourceOf(out[i].Source)
		if tops[s] == nil {
			for _, k := range []Kind{KindClient, KindPrefix, KindName} {
				tops[s] = append(tops[s], p.view(s, k, AlarmWindow, p.top))
			}
		}
		out[i].Top = tops[s]
		p.alarms.setTop(out[i].ID, tops[s])
		p.raised[out[i].Reason]++
	}
	return out
}

// sourceOf is the source whose queries name the clients of an alarm of
// source name: the responder's and dnstap's their own; a VIP's packets,
// which go to the resolvers, dnstap's.
func sourceOf(name string) Source {
	if name == SourceResponder.String() {
		return SourceResponder
	}
	return SourceDnstap
}

// view is source s's view (p.mu held): empty, of s, before its first
// query.
func (p *Pipeline) view(s Source, kind Kind, window time.Duration, top int) View {
	if s >= numSources || p.trackers[s] == nil {
		return View{Source: s, Kind: kind}
	}
	return p.trackers[s].View(kind, window, top)
}

// Active are the alarms raised now.
func (p *Pipeline) Active() []Alarm {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alarms.Active()
}

// Dropped is how many queries producers could not record (see Intake).
func (p *Pipeline) Dropped() uint64 { return p.intake.Dropped() }

// Top is the view of kind over window of source's queries, its top
// entries (see Tracker.View); empty before the source's first query.
func (p *Pipeline) Top(source Source, kind Kind, window time.Duration, top int) View {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.view(source, kind, window, top)
}

// Sources are the sources that counted queries (the responder always),
// in order.
func (p *Pipeline) Sources() []Source {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Source
	for s, t := range p.trackers {
		if t != nil {
			out = append(out, Source(s))
		}
	}
	return out
}

// Config is the trackers' and the alarms' configuration, with defaults.
func (p *Pipeline) Config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Config{Tracker: p.trackers[SourceResponder].Config(), Alarms: p.alarms.Config(), Top: p.top}
}

// SetAlarms changes the alarms' configuration and the keys an alarm
// names (a reload); the tracker keeps its size.
func (p *Pipeline) SetAlarms(cfg AlarmConfig, top int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.alarms.SetConfig(cfg)
	if top > 0 {
		p.top = top
	}
}

// Counters are a pipeline's counts since it started, for metrics.
type Counters struct {
	// Queries are the queries of the closed epochs, by source name.
	Queries map[string]uint64
	// Raised are the alarms raised, by reason.
	Raised map[Reason]uint64
	// Dropped are the queries the producers could not record.
	Dropped uint64
	// Stride is the summaries' sampling now (Tracker.Stride), the
	// sparsest of the sources'.
	Stride uint64
	// Rates are the sources' last rates and baselines.
	Rates []SourceRate
	// Active are the alarms raised now.
	Active []Alarm
}

// Counters returns the pipeline's counts.
func (p *Pipeline) Counters() Counters {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := Counters{Queries: map[string]uint64{}, Raised: map[Reason]uint64{}, Dropped: p.intake.Dropped(),
		Stride: 1, Rates: p.alarms.Rates(), Active: p.alarms.Active()}
	for _, t := range p.trackers {
		if t != nil {
			c.Stride = max(c.Stride, t.Stride())
		}
	}
	for s, n := range p.totals {
		c.Queries[Source(s).String()] = n
	}
	for r, n := range p.raised {
		c.Raised[r] = n
	}
	return c
}
