package responder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/configs"
	"lbdns/flood"
	"lbdns/gslb"
	"lbdns/gslb/topology"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/monitor"
	"lbdns/responder/doh"
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
	// Hub, when set, is where Run waits for new versions of the
	// configuration, the facts and the operator intent, and where the
	// responder publishes the GSLB pools' states it answers from
	// (Hub.GSLB) and its own state (Hub.Responder). Config, Statuses,
	// Changes and Intent, when nil, read it. Nil: Run builds once.
	Hub *hub.Hub
	// Config returns the running configuration (read at start and on
	// every change). Required unless Hub is set.
	Config func() *configs.Config
	// Statuses returns the monitor's statuses, from which the GSLB
	// members' states are evaluated. Required unless Hub is set.
	Statuses func() map[monitor.Key]monitor.TargetStatus
	// Forced returns the member states forced over the statuses (the
	// fleet's verdicts, gslb.EvaluateForced). Nil: Hub.Forced with a
	// Hub, else none.
	Forced func() gslb.ForcedStates
	// Changes, when set, counts the changes of the monitor's states
	// (monitor.Monitor.Changes, or the versions of Hub.Facts and
	// Hub.Forced added up): the
	// responder reads Statuses again only when it moved since the last
	// read, and when it has not moved since Prepare read them, the Update
	// of a reload takes Prepare's members' states instead of evaluating
	// them again. Nil: every update reads and evaluates them.
	Changes func() uint64
	// Intent returns the operator intent in force (read on every
	// update). Nil: none.
	Intent func() intent.State
	// Revision returns the operator intent's store revision, which the
	// SOA serial follows (read on every update). Nil: 0.
	Revision func() uint64
	// Changer, when set, runs the GSLB requests' changes of the intent
	// (SetGSLB); Journal, when set, hears those that changed it.
	Changer intent.Changer
	Journal RequestJournal
	// Registerer receives the responder's metrics. Nil: none.
	Registerer prometheus.Registerer
	// Logger receives the responder's logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Flood, when set, counts every query the listeners read (see
	// Server.Flood).
	Flood *flood.Pipeline
	// Build builds the topology and the snapshots. Zero fields:
	// DefaultBuilders'.
	Build Builders
	// Versions, in a fleet, is the register the configuration version
	// behind the SOA serial comes from (see SerialStore); Run follows
	// it. Nil: the host's own count.
	Versions VersionRegister
	// ResyncEvery is how often Run asks Versions again while the
	// version is not the fleet's (the register could not be reached).
	// Default 5 s.
	ResyncEvery time.Duration
}

// Responder is the GSLB responder as the daemon runs it: it owns the DNS
// listeners of [gslb.server], the persisted SOA serial, the topology of
// the running configuration, and the answer snapshot, rebuilt and swapped
// on start, on reload and whenever a GSLB member's state changes.
type Responder struct {
	o       ResponderOptions
	log     *slog.Logger
	metrics *Metrics

	mu  sync.Mutex
	srv *Server
	// version is the configuration version of cfg (SerialStore); rev
	// the intent revision the serial was served under.
	version uint32
	rev     uint64
	cfg     *configs.Config // the configuration the snapshot was built from
	loc     gslb.Locator
	serial  uint32
	pools   []gslb.PoolState
	intent  intent.State // the intent the snapshot was built under
	snap    gslb.Answerer

	// store keeps the configuration version (serialStore, under
	// storeMu: Accept reads it from the daemon's loop).
	storeMu sync.Mutex
	store   *SerialStore

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
	// lastResorts is degraded without the times, as the hub's state
	// lists them: made once per change (40,000 entries while 20,000
	// names warm up), never modified, shared by the states published.
	lastResorts []gslb.NameStatus

	// served is the version of Hub.Intent the last Update read (and
	// answers under, when done): what WaitIntent waits on.
	served *hub.Value[uint64]
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
	if o.ResyncEvery <= 0 {
		o.ResyncEvery = 5 * time.Second
	}
	if h := o.Hub; h != nil {
		if o.Config == nil {
			o.Config = func() *configs.Config { c, _ := h.Config.Load(); return c }
		}
		if o.Statuses == nil {
			o.Statuses = func() map[monitor.Key]monitor.TargetStatus { f, _ := h.Facts.Load(); return f }
			if o.Changes == nil {
				o.Changes = func() uint64 { return h.Facts.Version() + h.Forced.Version() }
			}
		}
		if o.Forced == nil {
			o.Forced = func() gslb.ForcedStates { f, _ := h.Forced.Load(); return f }
		}
		if o.Intent == nil {
			o.Intent = func() intent.State { i, _ := h.Intent.Load(); return i.State }
		}
		if o.Revision == nil {
			o.Revision = func() uint64 { i, _ := h.Intent.Load(); return i.Revision }
		}
	}
	def := DefaultBuilders()
	if o.Build.Locator == nil {
		o.Build.Locator = def.Locator
	}
	if o.Build.Snapshot == nil {
		o.Build.Snapshot = def.Snapshot
	}
	r := &Responder{o: o, log: o.Logger, served: hub.NewValue[uint64]()}
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
// it, and, with a Hub, rebuilds it whenever a new version of the
// configuration, the facts or the intent is published, until ctx is done;
// then it stops the listeners. Problems are logged: a snapshot that
// cannot be built leaves the last one in place, a listener that cannot be
// opened leaves the responder off until a reload changes [gslb.server].
func (r *Responder) Run(ctx context.Context) {
	h := r.o.Hub
	var seen versions
	if h != nil {
		seen = versionsOf(h) // before the first build: no change is missed
	}
	var wake chan struct{}
	var resync <-chan time.Time
	var watching sync.WaitGroup
	defer watching.Wait()
	if r.o.Versions != nil && h != nil {
		wake = make(chan struct{}, 1)
		watching.Go(func() {
			r.o.Versions.Watch(ctx, func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			})
		})
		t := time.NewTicker(r.o.ResyncEvery)
		defer t.Stop()
		resync = t.C
	}
	took := r.refresh()
	if resync != nil && r.resync() { // a version another host raised while this one was away
		took = r.refresh() // served first: an unreachable register does not hold back the first answers
	}
	ended := time.Now()
	for h != nil {
		select {
		case <-ctx.Done():
		case <-h.Config.Changed(seen.config):
		case <-h.Facts.Changed(seen.facts):
		case <-h.Forced.Changed(seen.forced):
		case <-h.Intent.Changed(seen.intent):
		case <-wake:
			if !r.resync() {
				continue
			}
		case <-resync:
			if r.synced() || !r.resync() {
				continue
			}
		}
		if ctx.Err() != nil {
			break
		}
		// A burst of changes (the first probe round of thousands of
		// members) costs one rebuild per pause as long as the last
		// rebuild, not one per change: rebuilds take at most half a
		// core. A change after a quiet spell is built at once, and a new
		// configuration (a reload, asked once, by an operator) is not
		// held back.
		if pause := time.Until(ended.Add(min(took, maxPause))); pause > time.Millisecond && h.Config.Version() == seen.config {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
		seen = versionsOf(h) // before the build: what changes during it wakes the next round
		took = r.refresh()
		ended = time.Now()
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r.Stop(sctx)
}

// versions are the versions of the hub's values a build read.
type versions struct{ config, facts, forced, intent uint64 }

// versionsOf returns the versions of h's values the responder builds from.
func versionsOf(h *hub.Hub) versions {
	return versions{config: h.Config.Version(), facts: h.Facts.Version(), forced: h.Forced.Version(), intent: h.Intent.Version()}
}

// Start runs Run(ctx) in a goroutine of wg: wg is done once the
// responder has stopped.
func (r *Responder) Start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { r.Run(ctx) })
}

// maxPause is the longest Run waits after a change before it rebuilds.
const maxPause = 100 * time.Millisecond

// Refresh updates the responder at once from the running configuration,
// the monitor's statuses and the operator intent: when it returns, every
// listener answers from a snapshot built under the intent in force.
func (r *Responder) Refresh() { r.refresh() }

// saw records that an update read version v of Hub.Intent (or a later
// one) and is done: its listeners answer under it.
func (r *Responder) saw(v uint64) {
	if old, _ := r.served.Load(); v > old { // Update runs one at a time: no race between Load and Publish
		r.served.Publish(v)
	}
}

// WaitIntent waits until the responder has updated under version v of
// Hub.Intent or a later one (built, or failed and kept its last answers,
// or off), so that a request that changed the intent is answered after
// every listener answers under it; it returns ctx's error when ctx is
// done first. Without a Hub it returns at once.
func (r *Responder) WaitIntent(ctx context.Context, v uint64) error {
	if r.o.Hub == nil {
		return nil
	}
	served, ver := r.served.Load()
	for served < v {
		var err error
		if served, ver, err = r.served.Wait(ctx, ver); err != nil {
			return err
		}
	}
	return nil
}

// refresh updates the responder from the running configuration and the
// monitor's statuses, and returns how long that took.
func (r *Responder) refresh() time.Duration {
	began := time.Now()
	cfg := r.o.Config()
	if pools := r.preparedPools(cfg); pools != nil {
		_ = r.Update(cfg, pools) // logged by Update
		return time.Since(began)
	}
	_ = r.Update(cfg, gslb.EvaluateForced(cfg, r.statuses(), r.forced(), r.o.Now())) // logged by Update
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
	defer r.publishLocked()
	if h := r.o.Hub; h != nil {
		defer r.saw(h.Intent.Version()) // read before the intent: what it reads is this version or a later one
	}
	newCfg := cfg != r.cfg
	if len(cfg.GSLB.Server.ListenAddrs) == 0 { // off: nothing to build, serve or persist
		if newCfg && r.srv != nil {
			r.log.Info("gslb responder off ([gslb.server] listen is empty)")
		}
		r.stopLocked(context.Background())
		r.cfg, r.pools, r.snap, r.degraded, r.lastResorts, r.listenErr = cfg, nil, nil, nil, nil, ""
		return nil
	}
	var want intent.State
	if r.o.Intent != nil {
		want = r.o.Intent() // under r.mu: the last update has the last intent
	}
	var rev uint64
	if r.o.Revision != nil {
		rev = r.o.Revision()
	}
	if !newCfg && samePools(pools, r.pools) && sameIntent(want, r.intent) && rev == r.rev && r.storeVersion() == r.version {
		return nil
	}
	loc, version := r.loc, r.version
	old := r.loc
	began := time.Now()
	var tookTopology time.Duration
	var ready *gslb.Snapshot // built by Prepare from the same states, under the same intent
	if !newCfg && samePools(pools, r.pools) && sameIntent(want, r.intent) {
		ready, _ = r.snap.(*gslb.Snapshot) // only the intent revision moved: the serial alone changes
	}
	if newCfg {
		store, err := r.serialStore(cfg)
		if err != nil {
			return r.failed("the gslb serial file cannot be used; the last answers stay", err)
		}
		var sum string
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
		if version, err = store.Version(sum); err != nil {
			return r.failed("cannot save the gslb configuration version; the last answers stay", err)
		}
		if err := store.RegisterError(); err != nil && !store.Synced() {
			r.log.Warn("the fleet's register of configuration versions cannot be reached; the SOA serial follows this host's own count until it can", "version", version, "err", err)
		}
	}
	store, err := r.serialStore(cfg)
	if err != nil {
		return r.failed("the gslb serial file cannot be used; the last answers stay", err)
	}
	serial, err := store.Serve(rev)
	if err != nil {
		return r.failed("cannot save the gslb SOA serial; the last answers stay", err)
	}
	version = store.Current()
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
	r.cfg, r.loc, r.version, r.rev, r.serial, r.pools, r.intent, r.snap = cfg, loc, version, rev, serial, pools, want, snap
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
	if newCfg && replaced(old, loc) {
		// The last topology is out of use once its snapshot is: its
		// memory (hundreds of MB for millions of prefixes) goes back to
		// the system now, not after the runtime's next forced
		// collection and its slow scavenging.
		go debug.FreeOSMemory()
	}
	if newCfg {
		return r.listen(cfg)
	}
	return nil
}

// replaced reports whether the topology map old was replaced by a map
// built anew (a reload with the same sources reuses the last one).
func replaced(old, loc gslb.Locator) bool {
	o, ok := old.(*topology.Map)
	n, _ := loc.(*topology.Map)
	return ok && o != n
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

// Check is Accept: the responder's part of a reload's check (every
// component checks before any applies).
func (r *Responder) Check(cfg *configs.Config) error { return r.Accept(cfg) }

// Apply does nothing: the responder takes a configuration from
// Hub.Config, where the daemon publishes it once every component
// accepted it.
func (r *Responder) Apply(*configs.Config) {}

// Accept makes sure the responder can serve cfg before the daemon puts
// cfg in force (a start, a reload), so that a configuration is applied
// whole or rejected whole: it waits for the build Prepare started for cfg
// (starting one when none did), and returns the error of its topology,
// or of the serial file, or of saving cfg's configuration version. With
// [gslb.server] listen empty it accepts at once.
func (r *Responder) Accept(cfg *configs.Config) error {
	if len(cfg.GSLB.Server.ListenAddrs) == 0 {
		return nil
	}
	r.prepMu.Lock()
	p := r.prep
	r.prepMu.Unlock()
	if p == nil || p.cfg != cfg {
		r.Prepare(cfg)
		r.prepMu.Lock()
		p = r.prep
		r.prepMu.Unlock()
	}
	<-p.done
	if p.err != nil {
		return fmt.Errorf("gslb topology: %w", p.err)
	}
	if err := r.canListen(cfg); err != nil {
		return err
	}
	store, err := r.serialStore(cfg)
	if err != nil {
		return err
	}
	if _, err := store.Version(p.sum); err != nil {
		return fmt.Errorf("%w (the SOA serial must never go backwards, so a configuration whose version cannot be kept is not served)", err)
	}
	return nil
}

// canListen tries the listen addresses cfg adds to those served (UDP
// and TCP, closed at once), so that a configuration naming one that
// cannot be bound (not on this host, taken by another program) is
// refused whole and the listeners in force keep serving, rather than
// the responder going off on every address. An address served already,
// and one of port 0, are not tried.
func (r *Responder) canListen(cfg *configs.Config) error {
	r.mu.Lock()
	var served, fronts []netip.AddrPort
	if r.srv != nil {
		served = r.srv.Listen
		if f := r.srv.Fronts; f != nil {
			fronts = append(append(fronts, f.DoH...), f.DoT...)
		}
	}
	r.mu.Unlock()
	var errs []error
	for i, ap := range cfg.GSLB.Server.ListenAddrs {
		if ap.Port() == 0 || slices.Contains(served, ap) {
			continue
		}
		pc, ln, err := listenBoth(ap)
		if err != nil {
			name := ap.String()
			if i < len(cfg.GSLB.Server.Listen) {
				name = cfg.GSLB.Server.Listen[i]
			}
			errs = append(errs, fmt.Errorf("gslb.server.listen %q: cannot listen there: %w", name, err))
			continue
		}
		ln.Close()
		pc.Close()
	}
	t := cfg.GSLB.TLS
	for _, l := range []struct {
		key   string
		names []string
		addrs []netip.AddrPort
	}{{"doh_listen", t.DoHListen, t.DoHAddrs}, {"dot_listen", t.DoTListen, t.DoTAddrs}} {
		for i, ap := range l.addrs {
			if ap.Port() == 0 || slices.Contains(fronts, ap) {
				continue
			}
			ln, err := doh.Listen(ap)
			if err != nil {
				name := ap.String()
				if i < len(l.names) {
					name = l.names[i]
				}
				errs = append(errs, fmt.Errorf("gslb.tls.%s %q: cannot listen there: %w", l.key, name, err))
				continue
			}
			ln.Close()
		}
	}
	if t.On() {
		if err := doh.CheckPair(t.CertFile, t.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("gslb.tls cert_file %q, key_file %q: %w (the certificate in force keeps serving)", t.CertFile, t.KeyFile, err))
		}
	}
	return errors.Join(errs...)
}

// serialStore returns the store of the configuration version, loading it
// from cfg's state directory the first time.
func (r *Responder) serialStore(cfg *configs.Config) (*SerialStore, error) {
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	if r.store != nil {
		return r.store, nil
	}
	s := NewFleetSerialStore(cfg.Daemon.StateDir, r.o.Versions)
	if err := s.Load(); err != nil {
		return nil, fmt.Errorf("%w; repair or remove the file (removed, the serial restarts from 1 and may be lower than the one served before)", err)
	}
	r.store = s
	return s, nil
}

// storeVersion returns the serial store's version (0 before it is
// loaded).
func (r *Responder) storeVersion() uint32 {
	r.storeMu.Lock()
	s := r.store
	r.storeMu.Unlock()
	if s == nil {
		return 0
	}
	return s.Current()
}

// synced reports whether the serial store's version is the fleet's (true
// before the store is loaded: nothing to resync yet).
func (r *Responder) synced() bool {
	r.storeMu.Lock()
	s := r.store
	r.storeMu.Unlock()
	return s == nil || s.Synced()
}

// resync asks the fleet's register for the served data's version again
// (SerialStore.Resync) and reports whether it moved: the serial must
// then be served again. Its errors are logged once until it works again.
func (r *Responder) resync() bool {
	r.storeMu.Lock()
	s := r.store
	r.storeMu.Unlock()
	if s == nil {
		return false
	}
	before := s.RegisterError()
	moved, err := s.Resync()
	switch {
	case err != nil && before == nil:
		r.log.Warn("cannot reach the fleet's register of configuration versions; the SOA serial follows this host's own count until it can", "err", err)
	case err == nil && before != nil:
		r.log.Info("the fleet's register of configuration versions is reachable again", "version", s.Current())
	}
	return moved
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
	p.pools = gslb.EvaluateForced(p.cfg, st, r.forced(), r.o.Now())
}

// forced returns the member states forced over the statuses (nil:
// none).
func (r *Responder) forced() gslb.ForcedStates {
	if r.o.Forced == nil {
		return nil
	}
	return r.o.Forced()
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
	if r.srv != nil && slices.Equal(r.srv.Listen, want.ListenAddrs) && r.srv.UDPSize == want.UDPSize && r.srv.UDPReaders == want.UDPReaders && r.srv.TCP == tcp &&
		sameFronts(r.srv.Fronts, cfg.GSLB.TLS) {
		if f := r.srv.Fronts; f != nil {
			_ = f.Certs.Reload() // a reload reads a changed pair at once (its error is logged and counted)
		}
		return nil
	}
	r.stopLocked(context.Background())
	if len(want.ListenAddrs) == 0 {
		return nil
	}
	srv := &Server{Listen: want.ListenAddrs, UDPSize: want.UDPSize, UDPReaders: want.UDPReaders, TCP: tcp, Logger: r.log, Metrics: r.metrics, Flood: r.o.Flood}
	if t := cfg.GSLB.TLS; t.On() {
		certs, err := r.loadCerts(t)
		if err != nil {
			r.log.Error("gslb responder cannot load its tls certificate; it is off until a reload changes [gslb.server] or [gslb.tls]", "cert_file", t.CertFile, "key_file", t.KeyFile, "err", err)
			r.listenErr = err.Error()
			return err
		}
		srv.Fronts = FrontsOf(want, t, certs)
	}
	srv.Swap(r.snap)
	if err := srv.Start(); err != nil {
		r.log.Error("gslb responder cannot listen; it is off until a reload changes [gslb.server]", "listen", want.Listen, "err", err)
		r.listenErr = err.Error()
		return err
	}
	r.srv, r.listenErr = srv, ""
	return nil
}

// loadCerts loads the certificate of [gslb.tls] t, its later reads
// logged and counted.
func (r *Responder) loadCerts(t configs.GSLBTLS) (*doh.Certs, error) {
	certs, err := doh.LoadCerts(t.CertFile, t.KeyFile, t.CertCheckInterval.Duration, r.o.Now)
	if err != nil {
		return nil, err
	}
	fronts := r.metrics.frontSeries()
	certs.Reloaded = func(err error) {
		fronts.CertReloaded(err)
		if err != nil {
			r.log.Error("gslb tls certificate changed but cannot be loaded; the last one keeps serving", "cert_file", t.CertFile, "key_file", t.KeyFile, "err", err)
			return
		}
		fronts.SetCertExpiry(certs.NotAfter())
		r.log.Info("gslb tls certificate reloaded", "cert_file", t.CertFile, "not_after", certs.NotAfter())
	}
	return certs, nil
}

// sameFronts reports whether the fronts f (nil: none) serve [gslb.tls]
// t as it is.
func sameFronts(f *Fronts, t configs.GSLBTLS) bool {
	if f == nil {
		return !t.On()
	}
	return reflect.DeepEqual(f.config, t)
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
	r.publishLocked()
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
