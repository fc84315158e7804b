package flood

import (
	"sync"
	"time"
)

// Pipeline is the one way in for every input (the responder's readers,
// dnstap, anything else that sees queries) and the one place the
// heavy hitters are kept: an Intake drained into a Tracker. Inputs
// either take a Producer of their own (one per goroutine that records,
// the cheapest way: a lock nobody else takes but the drainer) or call
// Observe. Step (or Run, which calls it) drains, rotates the epochs and
// evaluates the alarms. Top is safe to call from any goroutine.
type Pipeline struct {
	intake *Intake

	mu      sync.Mutex
	tracker *Tracker
	inputs  map[Source]*Producer
}

// NewPipeline returns a pipeline whose tracker is sized by cfg and
// whose first epoch starts at now.
func NewPipeline(cfg TrackerConfig, now time.Time) *Pipeline {
	return &Pipeline{intake: NewIntake(), tracker: NewTracker(cfg, now), inputs: map[Source]*Producer{}}
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
	p.intake.Drain(p.tracker.addBatch)
}

// Rotate drains, then closes the epochs that ended by now (see
// Tracker.Rotate).
func (p *Pipeline) Rotate(now time.Time) []EpochTotal {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.intake.Drain(p.tracker.addBatch)
	return p.tracker.Rotate(now)
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

// Config is the tracker's configuration.
func (p *Pipeline) Config() TrackerConfig {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tracker.Config()
}
