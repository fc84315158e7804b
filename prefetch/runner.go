package prefetch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"

	"lbdns/probes"
)

// QueryFunc sends one prefetch query for spec to spec.Addr and reports the
// outcome. Its deadline comes from ctx.
type QueryFunc func(ctx context.Context, spec Spec) Outcome

// Options configure a Runner.
type Options struct {
	// MaxQPS caps queries per second over all entries (token bucket with a
	// burst of a tenth of a second's worth). Default 100.
	MaxQPS int
	// Jitter is the largest random delay added to a scheduled query.
	Jitter time.Duration
	// Timeout of one query. Default 1s.
	Timeout time.Duration
	// MaxInFlight bounds concurrent queries. Default 256.
	MaxInFlight int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Query sends one query. Default Query (miekg/dns over UDP, TCP on
	// truncation).
	Query QueryFunc
	// Rand returns a random duration in [0, n). Default math/rand/v2.
	Rand func(n time.Duration) time.Duration
}

// Runner keeps entries warm: one goroutine dispatches due entries from the
// Scheduler's timer heap, paced by the token bucket, to short-lived query
// goroutines (at most one per entry and MaxInFlight in all). Its methods
// are safe for concurrent use.
type Runner struct {
	opts Options

	mu       sync.Mutex // guards the fields below
	sched    *Scheduler
	bucket   bucket
	inflight int

	wake chan struct{}
	wg   sync.WaitGroup
}

// New returns a Runner with no entries; call Update, SetHealthy and Run.
func New(opts Options) *Runner {
	if opts.MaxQPS <= 0 {
		opts.MaxQPS = 100
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 256
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Query == nil {
		opts.Query = Query
	}
	if opts.Rand == nil {
		opts.Rand = func(n time.Duration) time.Duration { return rand.N(n) }
	}
	return &Runner{
		opts:   opts,
		sched:  NewScheduler(opts.Jitter, opts.Rand),
		bucket: newBucket(float64(opts.MaxQPS), max(1, float64(opts.MaxQPS)/10), opts.Now()),
		wake:   make(chan struct{}, 1),
	}
}

// Update makes specs the entries, keeping the state of unchanged keys.
func (r *Runner) Update(specs []Spec) {
	r.mu.Lock()
	r.sched.Set(specs, r.opts.Now())
	r.mu.Unlock()
	r.poke()
}

// SetHealthy says which resolvers (by name) are healthy and enabled; the
// entries of every other resolver are parked until they are.
func (r *Runner) SetHealthy(healthy map[string]bool) {
	r.mu.Lock()
	r.sched.SetHealthy(healthy, r.opts.Now())
	r.mu.Unlock()
	r.poke()
}

// Snapshot returns the state of every entry, sorted by key.
func (r *Runner) Snapshot() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sched.Snapshot(r.opts.Now())
}

// Totals returns the counters summed over every entry.
func (r *Runner) Totals() Counters {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sched.Totals()
}

func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run dispatches queries until ctx is done, then waits for the queries in
// flight (each bounded by Timeout) and returns nil.
func (r *Runner) Run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := r.dispatch(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			r.wg.Wait()
			return nil
		case <-timer.C:
		case <-r.wake:
		}
	}
}

// dispatch starts every query that is due and allowed, and returns how
// long to sleep before the next one may be.
func (r *Runner) dispatch(ctx context.Context) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opts.Now()
	for {
		if r.inflight >= r.opts.MaxInFlight {
			return time.Hour // a finishing query pokes
		}
		next, ok := r.sched.Next()
		if !ok {
			return time.Hour
		}
		if next.After(now) {
			return next.Sub(now)
		}
		if w := r.bucket.take(now); w > 0 {
			return w
		}
		spec, _ := r.sched.Pop(now)
		r.inflight++
		r.wg.Add(1)
		go r.query(ctx, spec)
	}
}

func (r *Runner) query(ctx context.Context, spec Spec) {
	defer r.wg.Done()
	qctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	o := r.opts.Query(qctx, spec)
	cancel()
	r.mu.Lock()
	r.inflight--
	r.sched.Done(spec.Key, o, r.opts.Now())
	r.mu.Unlock()
	r.poke()
}

// bucket is a token bucket on an injected clock.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newBucket(rate, burst float64, now time.Time) bucket {
	return bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

// take takes one token at now and returns 0, or returns how long until one
// is available.
func (b *bucket) take(now time.Time) time.Duration {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.burst, b.tokens+el.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return max(time.Millisecond, time.Duration((1-b.tokens)/b.rate*float64(time.Second)))
}

// Query sends spec's query to spec.Addr with miekg/dns: RD set, EDNS0
// (1232 bytes) with the ECS option when spec.ECS is valid, over UDP and
// again over TCP when truncated. NOERROR and NXDOMAIN are OK; the TTL is
// the smallest TTL in the answer section, or of the SOA in the authority
// section of a negative answer; the scope is that of the answer's ECS
// option.
func Query(ctx context.Context, spec Spec) Outcome {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(spec.Key.Name), spec.Key.Type)
	m.RecursionDesired = true
	m.SetEdns0(1232, false)
	if spec.ECS.IsValid() {
		opt := m.IsEdns0()
		a := spec.ECS.Unmap()
		e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 32, Address: net.IP(a.AsSlice())}
		if a.Is6() {
			e.Family, e.SourceNetmask = 2, 128
		}
		opt.Option = append(opt.Option, e)
	}
	start := time.Now()
	resp, err := probes.Exchange(ctx, spec.Addr, m)
	rtt := time.Since(start)
	if err != nil {
		return Outcome{RTT: rtt, Detail: err.Error()}
	}
	if resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
		return Outcome{RTT: rtt, Detail: "rcode " + dns.RcodeToString[resp.Rcode]}
	}
	ttl, ok := answerTTL(resp)
	if !ok {
		return Outcome{RTT: rtt, Detail: fmt.Sprintf("rcode %s without answer or SOA", dns.RcodeToString[resp.Rcode])}
	}
	return Outcome{OK: true, TTL: time.Duration(ttl) * time.Second, RTT: rtt, Scope: answerScope(resp)}
}

// answerScope returns the SCOPE PREFIX-LENGTH of m's ECS option, 0 when it
// has none.
func answerScope(m *dns.Msg) int {
	opt := m.IsEdns0()
	if opt == nil {
		return 0
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_SUBNET); ok {
			return int(e.SourceScope)
		}
	}
	return 0
}

// answerTTL returns the smallest TTL of the answer section, or of the SOA
// in the authority section when the answer is empty.
func answerTTL(m *dns.Msg) (uint32, bool) {
	found := false
	var ttl uint32
	for _, rr := range m.Answer {
		if t := rr.Header().Ttl; !found || t < ttl {
			ttl, found = t, true
		}
	}
	if found {
		return ttl, true
	}
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return min(soa.Hdr.Ttl, soa.Minttl), true
		}
	}
	return 0, false
}
