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

// Pipeline is the one way in for every input (the responder's readers,
// dnstap, anything else that sees queries) and the one place the heavy
// hitters and alarms are kept: an Intake drained into a Tracker, and
// Alarms over the rates and shares. Inputs either take a Producer of
// their own (one per goroutine that records: the cheapest way, a lock
// nobody else takes but the drainer) or call Observe. Step drains,
// rotates the epochs and evaluates the alarms; the caller runs it (and
// Drain when Wake has a value) from one goroutine. Every method is safe
// to call from any goroutine.
type Pipeline struct {
	intake *Intake
	top    int

	mu      sync.Mutex
	tracker *Tracker
	alarms  *Alarms
	inputs  map[Source]*Producer
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
	return &Pipeline{intake: NewIntake(), top: cfg.Top, tracker: NewTracker(cfg.Tracker, now),
		alarms: NewAlarms(cfg.Alarms), inputs: map[Source]*Producer{}, raised: map[Reason]uint64{}}
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

// drain is Drain with p.mu held: the queries seen but not recorded
// (no batch was free) are added to the epoch's totals.
func (p *Pipeline) drain() {
	cur := p.tracker.cur
	before := cur.sources
	seen := p.intake.Drain(p.tracker.addBatch)
	for s, n := range seen {
		if got := cur.sources[s] - before[s]; n > got {
			cur.sources[s] += n - got
			cur.total += n - got
		}
	}
}

// Step drains, closes the epochs that ended by now, and takes each
// closed epoch's rate of every source of queries, then (once a second)
// rates, the other sources' rates (a VIP's packets a second from IPVS:
// "vip NAME"), and the shares of the short window. It returns the
// alarms raised (with their Top) and cleared.
func (p *Pipeline) Step(now time.Time, rates map[string]float64) []Alarm {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drain()
	closed := p.tracker.Rotate(now)
	if len(closed) == 0 {
		return nil
	}
	var out []Alarm
	for _, e := range closed {
		for s, n := range e.Sources {
			p.totals[s] += n
		}
		end := e.Start.Add(Epoch)
		for s := range numSources {
			// A source is watched from its first query on (the
			// responder's from the start), so that its rate falling
			// to nothing is seen too.
			if e.Sources[s] > 0 {
				p.seen[s] = true
			}
			if s != SourceResponder && !p.seen[s] {
				continue
			}
			if al, ok := p.alarms.Rate(s.String(), float64(e.Sources[s]), end); ok {
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
	for _, k := range p.alarms.cfg.ShareKinds {
		out = append(out, p.alarms.Shares(p.tracker.View(k, p.tracker.cfg.Short, p.top), now)...)
	}
	slices.SortStableFunc(out, func(a, b Alarm) int { return strings.Compare(a.ID, b.ID) })
	var top []View
	for i := range out {
		if !out[i].Raised {
			continue
		}
		if top == nil {
			for _, k := range []Kind{KindClient, KindPrefix, KindName} {
				top = append(top, p.tracker.View(k, AlarmWindow, p.top))
			}
		}
		out[i].Top = top
		p.alarms.setTop(out[i].ID, top)
		p.raised[out[i].Reason]++
	}
	return out
}

// Active are the alarms raised now.
func (p *Pipeline) Active() []Alarm {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alarms.Active()
}

// Dropped is how many queries producers could not record (see Intake).
func (p *Pipeline) Dropped() uint64 { return p.intake.Dropped() }

// Top is the view of kind over window, its top entries (see
// Tracker.View).
func (p *Pipeline) Top(kind Kind, window time.Duration, top int) View {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tracker.View(kind, window, top)
}

// Config is the tracker's and the alarms' configuration, with defaults.
func (p *Pipeline) Config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Config{Tracker: p.tracker.Config(), Alarms: p.alarms.Config(), Top: p.top}
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
	// Stride is the summaries' sampling now (Tracker.Stride).
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
		Stride: p.tracker.Stride(), Rates: p.alarms.Rates(), Active: p.alarms.Active()}
	for s, n := range p.totals {
		c.Queries[Source(s).String()] = n
	}
	for r, n := range p.raised {
		c.Raised[r] = n
	}
	return c
}
