package prefetch

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"lbdns/configs"
	"lbdns/hub"
	"lbdns/resolvers"
)

// ServiceOptions configure a Service.
type ServiceOptions struct {
	// Now is the clock of the runners. Default time.Now.
	Now func() time.Time
	// Logger receives the service's lifecycle logs. Default: discard.
	Logger *slog.Logger
	// Query sends one query (Options.Query). Default Query.
	Query QueryFunc
	// Rand is the runners' random source (Options.Rand).
	Rand func(n time.Duration) time.Duration
}

// Service runs a Runner for the configuration in force: the runner starts
// with the first configuration that lists a [[prefetch.domain]] (at Start
// or on a later Configure), is brought to every new configuration, is
// restarted when max_qps, jitter or timeout change, and stops with Stop or
// when no domain is left. Start, Configure and Stop are called from one
// goroutine; SetHealthy and Status are safe from any.
type Service struct {
	opts ServiceOptions

	mu sync.Mutex // guards the fields below
	// ctx is Start's context, kept to start a runner on a later
	// Configure; nil before Start.
	ctx    context.Context
	runner *Runner
	cancel context.CancelFunc
	// limits are the settings the running runner was built with.
	limits configs.Prefetch
	// healthy is the last SetHealthy's set, handed to a new runner.
	healthy map[string]bool

	wg sync.WaitGroup
}

// NewService returns a Service with no runner; call Start.
func NewService(opts ServiceOptions) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{opts: opts}
}

// Start keeps ctx as the runners' parent context and starts a runner when
// cfg lists prefetch domains. The runner stops when ctx is done; Stop
// waits for it.
func (s *Service) Start(ctx context.Context, cfg *configs.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx = ctx
	s.startLocked(cfg)
}

// startLocked starts a runner for cfg unless one runs, Start was not
// called, or cfg lists no domain.
func (s *Service) startLocked(cfg *configs.Config) {
	if s.ctx == nil || s.runner != nil || len(cfg.Prefetch.Domains) == 0 {
		return
	}
	r := New(Options{
		MaxQPS:  cfg.Prefetch.MaxQPS,
		Jitter:  cfg.Prefetch.Jitter.Duration,
		Timeout: cfg.Prefetch.Timeout.Duration,
		Now:     s.opts.Now,
		Query:   s.opts.Query,
		Rand:    s.opts.Rand,
	})
	specs := Specs(cfg)
	r.Update(specs)
	r.SetHealthy(s.healthy)
	rctx, cancel := context.WithCancel(s.ctx)
	s.runner, s.cancel, s.limits = r, cancel, cfg.Prefetch
	s.wg.Go(func() { _ = r.Run(rctx) })
	s.opts.Logger.Info("prefetcher started", "entries", len(specs), "domains", len(cfg.Prefetch.Domains),
		"max_qps", cfg.Prefetch.MaxQPS, "jitter", cfg.Prefetch.Jitter.String())
	s.warnSubnet(cfg)
}

// warnSubnet logs, at start and at every reload, the unbound resolvers in
// window mode whose ECS entries run in expiry mode.
func (s *Service) warnSubnet(cfg *configs.Config) {
	if names := SubnetExpiry(cfg); len(names) > 0 {
		s.opts.Logger.Warn("prefetch: ECS entries of unbound resolvers in window mode run in expiry mode: unbound's subnet cache ignores \"prefetch: yes\", so a query in its window refreshes nothing",
			"resolvers", names)
	}
}

// Check refuses nothing: every [prefetch] table the configuration's
// validation passed can be applied.
func (s *Service) Check(*configs.Config) error { return nil }

// Apply is Configure (a reload's).
func (s *Service) Apply(cfg *configs.Config) { s.Configure(cfg) }

// Configure brings the service to a newly loaded configuration: entries
// whose (name, type, resolver, partition) is unchanged keep their state. A
// change of max_qps, jitter or timeout restarts the runner (its entries are
// then scheduled afresh); a configuration without domains stops it; the
// first one with domains after Start starts it.
func (s *Service) Configure(cfg *configs.Config) {
	s.mu.Lock()
	r := s.runner
	s.mu.Unlock()
	if r != nil && (len(cfg.Prefetch.Domains) == 0 || !sameLimits(s.limits, cfg.Prefetch)) {
		s.Stop()
		s.opts.Logger.Info("prefetcher stopped for reload", "domains", len(cfg.Prefetch.Domains))
		r = nil
	}
	if r == nil {
		s.mu.Lock()
		s.startLocked(cfg)
		s.mu.Unlock()
		return
	}
	specs := Specs(cfg)
	r.Update(specs)
	s.opts.Logger.Info("prefetcher updated", "entries", len(specs))
	s.warnSubnet(cfg)
}

func sameLimits(a, b configs.Prefetch) bool {
	return a.MaxQPS == b.MaxQPS && a.Jitter == b.Jitter && a.Timeout == b.Timeout
}

// SetHealthy says which resolvers (by name) may be queried: healthy and
// not disabled. The service keeps healthy (the caller must not change it
// afterwards) and hands it to every runner it starts later.
func (s *Service) SetHealthy(healthy map[string]bool) {
	s.mu.Lock()
	s.healthy = healthy
	r := s.runner
	s.mu.Unlock()
	if r != nil {
		r.SetHealthy(healthy)
	}
}

// Stop stops the runner, if one runs, and waits for its queries in
// flight. A later Configure may start a new one (while Start's context is
// not done).
func (s *Service) Stop() {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.runner, s.cancel = nil, nil
	s.mu.Unlock()
	s.wg.Wait()
}

// Status returns the state of every entry and the counters summed over
// them, or nil and nil when no runner runs.
func (s *Service) Status() ([]Status, *Counters) {
	s.mu.Lock()
	r := s.runner
	s.mu.Unlock()
	if r == nil {
		return nil, nil
	}
	t := r.Totals()
	return r.Snapshot(), &t
}

// FollowPlans hands the service the resolvers it may query each time a
// plan of plans that changes them is published, until ctx is done.
func (s *Service) FollowPlans(ctx context.Context, plans *hub.Value[resolvers.Plan]) {
	var after uint64
	var last map[string]bool
	for {
		plan, ver, err := plans.Wait(ctx, after)
		if err != nil {
			return
		}
		after = ver
		if healthy := plan.HealthyResolvers(); last == nil || !maps.Equal(healthy, last) {
			s.SetHealthy(healthy)
			last = healthy
		}
	}
}
