package server

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/control"
	"lbdns/gslb"
	"lbdns/gslb/topology"
	"lbdns/intent"
	"lbdns/monitor"
)

// SnapshotInput is what an answer snapshot is built from.
type SnapshotInput struct {
	// Config is the running configuration.
	Config *configs.Config
	// Pools are the GSLB pools' states (gslb.Evaluate), in configuration
	// order.
	Pools []gslb.PoolState
	// Locator is the topology of Config.
	Locator gslb.Locator
	// Serial is the zones' SOA serial.
	Serial uint32
	// Intent is the operator intent in force: emergency switches and TTL
	// raises (gslb.WithIntent).
	Intent intent.State
}

// Builders build what the responder answers from. They are the seams
// where the topology and the selection plug in.
type Builders struct {
	// Locator builds the topology map of cfg; it is called when the
	// configuration changes (start, reload), never per member change.
	Locator func(cfg *configs.Config) (gslb.Locator, error)
	// Snapshot builds the answer snapshot; it is called when the
	// configuration or a member's state changes, and by Prepare (beside
	// an Update: it must be safe for concurrent use).
	Snapshot func(in SnapshotInput) (gslb.Answerer, error)
}

// DefaultBuilders are the builders a Responder uses when its options set
// none: the topology map of package gslb/topology, through a
// topology.Cache (a reload with the same topology sources reuses the
// last map), and the selection's gslb.NewSnapshot.
func DefaultBuilders() Builders {
	cache := topology.NewCache()
	return Builders{
		Locator: func(cfg *configs.Config) (gslb.Locator, error) {
			m, _, err := cache.Load(cfg)
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		Snapshot: func(in SnapshotInput) (gslb.Answerer, error) {
			return gslb.NewSnapshot(in.Config, in.Pools, in.Locator, in.Serial, gslb.WithIntent(in.Intent)), nil
		},
	}
}

// Zoned is implemented by snapshots that can name their zones: the
// responder then exports the SOA serial per zone.
type Zoned interface {
	// Zones returns the apexes of the zones served.
	Zones() []string
}

// Emergent is implemented by snapshots that can list the names under
// operator intent: the responder then exports them as metrics.
type Emergent interface {
	// Emergencies lists the names switched off or under a TTL raise.
	Emergencies() []gslb.NameEmergency
}

// ResponderOptions configure a Responder.
type ResponderOptions struct {
	// Config returns the running configuration (read at start and on
	// every event that may have changed it). Required.
	Config func() *configs.Config
	// Statuses returns the monitor's statuses, from which the GSLB
	// members' states are evaluated. Required.
	Statuses func() map[monitor.Key]monitor.TargetStatus
	// Changes, when set, counts the changes of the monitor's states
	// (monitor.Monitor.Changes): the responder reads Statuses again only
	// when it moved since the last read, and when it has not moved since
	// Prepare read them, the Update of a reload takes Prepare's members'
	// states instead of evaluating them again. Nil: every update reads
	// and evaluates them.
	Changes func() uint64
	// Intent returns the operator intent in force (read on every
	// update). Nil: none.
	Intent func() intent.State
	// Events is the daemon's event log: a reload, a state change of a
	// GSLB monitor, or a GSLB intent event (control.EventGSLB) makes Run
	// rebuild the snapshot. Nil: Run builds once.
	Events *control.EventLog
	// Registerer receives the responder's metrics. Nil: none.
	Registerer prometheus.Registerer
	// Logger receives the responder's logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Build builds the topology and the snapshots. Zero fields:
	// DefaultBuilders'.
	Build Builders
}

// Responder is the GSLB responder as the daemon runs it: it owns the DNS
// listeners of [gslb.server], the persisted SOA serial, the topology of
// the running configuration, and the answer snapshot, rebuilt and swapped
// on start, on reload and whenever a GSLB member's state changes.
type Responder struct {
	o       ResponderOptions
	log     *slog.Logger
	metrics *Metrics

	mu     sync.Mutex
	srv    *Server
	store  *SerialStore
	cfg    *configs.Config // the configuration the snapshot was built from
	loc    gslb.Locator
	serial uint32
	pools  []gslb.PoolState
	intent intent.State // the intent the snapshot was built under
	snap   gslb.Answerer

	// prep is the last Prepare's build, until an Update takes it (under
	// prepMu: Prepare does not wait for an Update holding mu).
	prepMu sync.Mutex
	prep   *prepared

	// read is the last statuses read while the monitor's Changes was
	// readAt (under readMu; never modified: Evaluate only reads it).
	readMu sync.Mutex
	read   map[monitor.Key]monitor.TargetStatus
	readAt uint64

	built     time.Time    // when snap was built
	buildErr  string       // why the last build failed ("" when it worked)
	listenErr string       // why the listeners could not be opened
	degraded  []lastResort // the names of snap on their last resort
}

// NewResponder returns a responder; Run runs it. Metrics that cannot be
// registered are logged and left out.
func NewResponder(o ResponderOptions) *Responder {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	def := DefaultBuilders()
	if o.Build.Locator == nil {
		o.Build.Locator = def.Locator
	}
	if o.Build.Snapshot == nil {
		o.Build.Snapshot = def.Snapshot
	}
	r := &Responder{o: o, log: o.Logger}
	if o.Registerer != nil {
		m, err := NewMetrics(o.Registerer)
		if err != nil {
			r.log.Error("gslb responder metrics left out", "err", err)
		}
		r.metrics = m
	}
	return r
}

// Run builds the first snapshot from the running configuration, serves
// it, and rebuilds it on every reload and GSLB member state change of the
// event log until ctx is done; then it stops the listeners. Problems are
// logged: a snapshot that cannot be built leaves the last one in place,
// a listener that cannot be opened leaves the responder off until a
// reload changes [gslb.server].
func (r *Responder) Run(ctx context.Context) {
	var after uint64
	if r.o.Events != nil {
		after = r.o.Events.Last() // before the first build: no change is missed
	}
	took := r.refresh()
	for r.o.Events != nil {
		if r.o.Events.Wait(ctx, after) != nil {
			break
		}
		var evs []control.Event
		evs, after = r.o.Events.Since(after)
		if !relevant(evs) {
			continue
		}
		// A burst of changes (the first probe round of thousands of
		// members) costs one rebuild per pause as long as the last
		// rebuild, not one per event: rebuilds take at most half a
		// core. A reload (asked once, by an operator) is not held back.
		if pause := min(took, maxPause); pause > time.Millisecond && !slices.ContainsFunc(evs, isReload) {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
		took = r.refresh()
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r.Stop(sctx)
}

// Start runs Run(ctx) in a goroutine of wg: wg is done once the
// responder has stopped.
func (r *Responder) Start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { r.Run(ctx) })
}

// relevant reports whether evs may change the answers: a reload, a GSLB
// intent change, or a GSLB monitor's state change.
func relevant(evs []control.Event) bool {
	for _, ev := range evs {
		switch {
		case ev.Kind == control.EventReload,
			ev.Kind == control.EventGSLB,
			ev.Kind == control.EventState && strings.HasPrefix(ev.Subject, gslb.MonitorKind+":"):
			return true
		}
	}
	return false
}

// isReload reports whether ev is a reload.
func isReload(ev control.Event) bool { return ev.Kind == control.EventReload }

// maxPause is the longest Run waits after a change before it rebuilds.
const maxPause = 100 * time.Millisecond

// Refresh updates the responder at once from the running configuration,
// the monitor's statuses and the operator intent: when it returns, every
// listener answers from a snapshot built under the intent in force.
func (r *Responder) Refresh() { r.refresh() }

// refresh updates the responder from the running configuration and the
// monitor's statuses, and returns how long that took.
func (r *Responder) refresh() time.Duration {
	began := time.Now()
	cfg := r.o.Config()
	if pools := r.preparedPools(cfg); pools != nil {
		_ = r.Update(cfg, pools) // logged by Update
		return time.Since(began)
	}
	_ = r.Update(cfg, gslb.Evaluate(cfg, r.statuses(), r.o.Now())) // logged by Update
	return time.Since(began)
}

// Update makes cfg and pools (the GSLB pools' states under cfg) what the
// responder answers from. With [gslb.server] listen empty the responder
// is off: it closes its listeners and builds nothing. Else, on a new
// configuration it rebuilds the topology, moves the serial when the
// served data changed, and opens or moves the listeners as [gslb.server]
// says; it rebuilds the snapshot when the configuration or a member's
// state changed, and swaps it in. On an error (logged and returned) the
// last snapshot stays.
func (r *Responder) Update(cfg *configs.Config, pools []gslb.PoolState) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	newCfg := cfg != r.cfg
	if len(cfg.GSLB.Server.ListenAddrs) == 0 { // off: nothing to build, serve or persist
		if newCfg && r.srv != nil {
			r.log.Info("gslb responder off ([gslb.server] listen is empty)")
		}
		r.stopLocked(context.Background())
		r.cfg, r.pools, r.snap, r.degraded, r.listenErr = cfg, nil, nil, nil, ""
		return nil
	}
	var want intent.State
	if r.o.Intent != nil {
		want = r.o.Intent() // under r.mu: the last update has the last intent
	}
	if !newCfg && samePools(pools, r.pools) && sameIntent(want, r.intent) {
		return nil
	}
	loc, serial := r.loc, r.serial
	began := time.Now()
	var tookTopology time.Duration
	var ready *gslb.Snapshot // built by Prepare from the same states, under the same intent
	if newCfg {
		if r.store == nil {
			r.store = NewSerialStore(cfg.Daemon.StateDir, r.o.Now)
			if err := r.store.Load(); err != nil {
				r.log.Warn("gslb serial file unusable; the serial restarts from the clock", "path", r.store.Path(), "err", err)
			}
		}
		var sum string
		var err error
		if p := r.takePrepared(cfg); p != nil {
			loc, sum, err = p.loc, p.sum, p.err
			if p.snap != nil && samePools(pools, p.pools) && sameIntent(want, p.intent) {
				ready = p.snap
			}
		} else {
			loc, sum, err = r.topology(cfg)
		}
		if err != nil {
			return r.failed("cannot build the gslb topology; the last answers stay", err)
		}
		tookTopology = time.Since(began)
		if serial, err = r.store.Next(sum); err != nil {
			r.log.Error("cannot save the gslb SOA serial; it is served all the same", "serial", serial, "err", err)
		}
	}
	var snap gslb.Answerer
	if ready != nil {
		snap = ready.WithSerial(serial)
	} else {
		var err error
		if snap, err = r.o.Build.Snapshot(SnapshotInput{Config: cfg, Pools: pools, Locator: loc, Serial: serial, Intent: want}); err != nil {
			return r.failed("cannot build the gslb answer snapshot; the last answers stay", err)
		}
	}
	if r.metrics != nil {
		r.metrics.built(nil)
	}
	if serial != r.serial || newCfg {
		r.log.Info("gslb configuration in force", "serial", serial,
			"topology_ms", tookTopology.Milliseconds(), "build_ms", time.Since(began).Milliseconds(), "prepared", ready != nil)
	}
	r.cfg, r.loc, r.serial, r.pools, r.intent, r.snap = cfg, loc, serial, pools, want, snap
	r.built, r.buildErr = r.o.Now(), ""
	r.noteDegraded(snap)
	if z, ok := snap.(Zoned); ok && r.metrics != nil {
		r.metrics.setSerial(z.Zones(), serial)
	}
	if e, ok := snap.(Emergent); ok && r.metrics != nil {
		r.metrics.setEmergencies(e.Emergencies())
	}
	if r.srv != nil {
		r.srv.Swap(snap)
	}
	if newCfg {
		return r.listen(cfg)
	}
	return nil
}

// prepared is the topology and the served data's hash of a configuration,
// built by Prepare ahead of its Update, and its answer snapshot as the
// members' states and the intent were then.
type prepared struct {
	cfg  *configs.Config
	done chan struct{} // closed when the fields below are set
	loc  gslb.Locator
	sum  string
	err  error
	// snap (nil: none) was built from pools under intent, with serial 0;
	// pools were evaluated from the statuses read when the monitor's
	// Changes was changes (pools, intent and changes are set also when
	// snap is not).
	snap    *gslb.Snapshot
	pools   []gslb.PoolState
	intent  intent.State
	changes uint64
}

// Prepare starts building, in the background, what Update needs of the
// new configuration cfg: its topology, the hash of its served data and,
// from the members' states and the intent as they are now, its answer
// snapshot. The daemon calls it as soon as a reload has parsed cfg, so
// that the build runs beside the monitor's reconcile of cfg's targets;
// the Update of cfg then takes it instead of building it (the snapshot
// only when the states it is given and the intent are still those it was
// built from: a reload that keeps a member's monitors keeps its state;
// else Update builds the snapshot again). A cfg that is never given to
// Update (a reload rejected after the parse) costs that build only.
// Builds run one at a time.
func (r *Responder) Prepare(cfg *configs.Config) {
	if len(cfg.GSLB.Server.ListenAddrs) == 0 {
		return // off: Update builds nothing
	}
	p := &prepared{cfg: cfg, done: make(chan struct{})}
	r.prepMu.Lock()
	last := r.prep
	r.prep = p
	r.prepMu.Unlock()
	go func() {
		defer close(p.done)
		if last != nil {
			<-last.done // Build.Locator need not be safe for concurrent use
		}
		// The hash beside the members' states and the topology, and
		// beside the snapshot built from them.
		hash := make(chan string, 1)
		go func() { hash <- ConfigHash(cfg) }()
		var wg sync.WaitGroup
		wg.Go(func() { r.evaluate(p) })
		p.loc, p.err = r.o.Build.Locator(cfg)
		wg.Wait()
		if p.err == nil {
			r.speculate(p)
		}
		p.sum = <-hash
	}()
}

// evaluate evaluates the members of p's configuration from the monitor's
// states as they are now, under the intent in force.
func (r *Responder) evaluate(p *prepared) {
	if r.o.Changes != nil {
		p.changes = r.o.Changes() // before the statuses (see monitor.Monitor.Changes)
	}
	st := r.statuses()
	if r.o.Intent != nil {
		p.intent = r.o.Intent()
	}
	p.pools = gslb.Evaluate(p.cfg, st, r.o.Now())
}

// speculate builds p's snapshot from the members' states and the intent
// evaluate took. Only a *gslb.Snapshot is kept: Update gives it its
// serial with WithSerial.
func (r *Responder) speculate(p *prepared) {
	snap, err := r.o.Build.Snapshot(SnapshotInput{Config: p.cfg, Pools: p.pools, Locator: p.loc, Intent: p.intent})
	if s, ok := snap.(*gslb.Snapshot); ok && err == nil {
		p.snap = s
	}
}

// statuses returns the monitor's statuses: those read last when the
// monitor's Changes has not moved since (the states are the same; the
// last results may be older, and only the states make the answers), else
// read now. Reading 50,000 statuses costs ~80 ms.
func (r *Responder) statuses() map[monitor.Key]monitor.TargetStatus {
	if r.o.Statuses == nil {
		return nil
	}
	if r.o.Changes == nil {
		return r.o.Statuses()
	}
	at := r.o.Changes() // before the statuses (see monitor.Monitor.Changes)
	r.readMu.Lock()
	st, ok := r.read, r.read != nil && r.readAt == at
	r.readMu.Unlock()
	if ok {
		return st
	}
	st = r.o.Statuses()
	r.readMu.Lock()
	r.read, r.readAt = st, at
	r.readMu.Unlock()
	return st
}

// preparedPools returns the members' states Prepare evaluated for cfg
// when the monitor's states have not changed since (nil when they may
// have, or when no snapshot of cfg was prepared). It waits for Prepare's
// build.
func (r *Responder) preparedPools(cfg *configs.Config) []gslb.PoolState {
	if r.o.Changes == nil {
		return nil
	}
	r.prepMu.Lock()
	p := r.prep
	r.prepMu.Unlock()
	if p == nil || p.cfg != cfg {
		return nil
	}
	<-p.done
	if p.snap == nil || r.o.Changes() != p.changes {
		return nil
	}
	return p.pools
}

// takePrepared waits for the build Prepare started, if any (Build.Locator
// runs once at a time), and returns it when it is of cfg.
func (r *Responder) takePrepared(cfg *configs.Config) *prepared {
	r.prepMu.Lock()
	p := r.prep
	r.prepMu.Unlock()
	if p == nil {
		return nil
	}
	<-p.done
	if p.cfg != cfg {
		return nil
	}
	r.prepMu.Lock()
	if r.prep == p {
		r.prep = nil
	}
	r.prepMu.Unlock()
	return p
}

// topology builds cfg's topology and, beside it, the hash of its served
// data (both read cfg only).
func (r *Responder) topology(cfg *configs.Config) (gslb.Locator, string, error) {
	hash := make(chan string, 1)
	go func() { hash <- ConfigHash(cfg) }()
	loc, err := r.o.Build.Locator(cfg)
	return loc, <-hash, err
}

// failed logs and counts a build that failed, and returns err.
func (r *Responder) failed(msg string, err error) error {
	r.log.Error(msg, "err", err)
	r.buildErr = err.Error()
	if r.metrics != nil {
		r.metrics.built(err)
	}
	return err
}

// listen brings the listeners to cfg's [gslb.server]: unchanged, they
// stay; changed, the old server stops and a new one starts.
func (r *Responder) listen(cfg *configs.Config) error {
	want, tcp := cfg.GSLB.Server, TCPLimitsOf(cfg.GSLB.Server)
	if r.srv != nil && slices.Equal(r.srv.Listen, want.ListenAddrs) && r.srv.UDPSize == want.UDPSize && r.srv.UDPReaders == want.UDPReaders && r.srv.TCP == tcp {
		return nil
	}
	r.stopLocked(context.Background())
	if len(want.ListenAddrs) == 0 {
		return nil
	}
	srv := &Server{Listen: want.ListenAddrs, UDPSize: want.UDPSize, UDPReaders: want.UDPReaders, TCP: tcp, Logger: r.log, Metrics: r.metrics}
	srv.Swap(r.snap)
	if err := srv.Start(); err != nil {
		r.log.Error("gslb responder cannot listen; it is off until a reload changes [gslb.server]", "listen", want.Listen, "err", err)
		r.listenErr = err.Error()
		return err
	}
	r.srv, r.listenErr = srv, ""
	return nil
}

// Addrs returns the addresses served (ports picked for port 0 resolved);
// nil when the responder is off.
func (r *Responder) Addrs() []netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv == nil {
		return nil
	}
	return r.srv.Addrs()
}

// Serial returns the SOA serial in force (0 before the first Update).
func (r *Responder) Serial() uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.serial
}

// Stop stops the listeners, waiting for the queries being answered until
// ctx is done.
func (r *Responder) Stop(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked(ctx)
}

func (r *Responder) stopLocked(ctx context.Context) {
	if r.srv == nil {
		return
	}
	if err := r.srv.Shutdown(ctx); err != nil {
		r.log.Warn("gslb responder stopped uncleanly", "err", err)
	}
	r.srv = nil
}

// samePools reports whether a and b give the same answers: the same
// pools with the same members in the same states (reasons, times and
// monitor details aside).
func samePools(a, b []gslb.PoolState) bool {
	return slices.EqualFunc(a, b, func(x, y gslb.PoolState) bool {
		return x.Name == y.Name && slices.EqualFunc(x.Members, y.Members, func(m, n gslb.MemberState) bool {
			return m.Name == n.Name && m.Addr == n.Addr && m.State == n.State && m.Weight == n.Weight && m.Priority == n.Priority
		})
	})
}

// sameIntent reports whether a and b switch and raise the same names the
// same way (reasons, times and authors included: cheap, and rare).
func sameIntent(a, b intent.State) bool {
	return slices.Equal(a.Emergencies, b.Emergencies) && slices.Equal(a.TTLRaises, b.TTLRaises)
}
