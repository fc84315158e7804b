// Package daemon wires lbdnsd together: it loads the configuration, runs
// the health monitor over every pool member, applies the pool policy, and
// reconciles the kernel's IPVS table with the result. It owns the lifecycle
// (start, reload, stop) and never flushes the IPVS table: on start it adopts
// what the kernel has, on stop it leaves the table as it is so that traffic
// keeps flowing while the daemon restarts.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lbdns/announce"
	"lbdns/check"
	"lbdns/clients"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/dnstap/feed"
	"lbdns/fleet/node"
	"lbdns/flood/alarms"
	"lbdns/gslb"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/internal/sdnotify"
	"lbdns/monitor"
	"lbdns/monitor/identify"
	"lbdns/prefetch"
	"lbdns/probes"
	"lbdns/report"
	"lbdns/resolvers"
	"lbdns/responder"
	"lbdns/vip"
)

// Options configure a Daemon.
type Options struct {
	// ConfigPath is the TOML file to load (and to reload on Reload).
	ConfigPath string
	// DryRun runs every check and computes the IPVS table without applying
	// it: the table lives in memory and is written, labelled as not
	// applied, to dry-run-table.txt in the state directory.
	DryRun bool
	// Logger receives the daemon's logs. Default: discard.
	Logger *slog.Logger
	// LogLevel, when set, is adjusted to the config's daemon.log_level on
	// start and reload.
	LogLevel *slog.LevelVar
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Client, when set, replaces the kernel (or dry-run) IPVS client; tests
	// use it.
	Client vip.Client
	// Checkers, when set, builds the checker of one health target (a
	// resolver's address under a check profile) instead of the probes of
	// package probes; tests use it.
	Checkers func(chk *configs.Check, addr netip.AddrPort) (check.Checker, error)
	// Probe, when set and Checkers is not, checks every target by calling
	// Probe with its address and check profile; tests use it.
	Probe probes.Func
	// Identify, when set, replaces the CHAOS version.bind identification
	// the identify.Identifier runs.
	Identify func(ctx context.Context, addr netip.AddrPort) (string, error)
	// InterfaceAddrs, when set, replaces the reading of this host's
	// interface addresses (net.InterfaceAddrs) that the fleet's canary
	// choice and self-exclusion use; tests use it.
	InterfaceAddrs func() ([]netip.Addr, error)
	// TickInterval is how often the pool policy is re-evaluated even
	// without health events (to notice stale facts). Default 1s.
	TickInterval time.Duration
	// DiscardBadState, when set, moves a state file that cannot be parsed
	// aside (keeping it as FILE.bad-TIME) and starts without its
	// overrides, instead of refusing to start.
	DiscardBadState bool
	// Store, when set, keeps the operator intent instead of the file
	// intent.FileName in daemon.state_dir (DiscardBadState then does not
	// apply); tests use it.
	Store intent.Store
	// Registry receives the daemon's Prometheus metrics and is what
	// /metrics serves. Default: a new registry with only lbdns's series.
	Registry *prometheus.Registry
	// Notifier, when set, hears the loop's life for systemd: Alive on every tick, and each reload.
	Notifier *sdnotify.Notifier
	// ClientsNetNS, when not 0, is an open network namespace whose
	// nftables ruleset enforces the client actions (tests); 0 is the
	// daemon's own.
	ClientsNetNS int
	// Dnstap, when set, takes every client message of the dnstap
	// intake ([dnstap]; package dnstap/feed). Without it the intake counts them
	// and keeps the latest per sender only.
	Dnstap feed.Consumer
}

// Daemon is a running lbdnsd. Create it with New and call Run.
type Daemon struct {
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	client vip.Client
	closer func() error
	// closeProbe closes the probe's cached sockets.
	closeProbe func() error
	dryRun     bool
	// noIPVS is set on a host started without a VIP (and without IPVS
	// services of its own left from an earlier configuration): it opened
	// no netlink client, and a reload that adds a VIP is refused.
	noIPVS bool

	mon   *monitor.Monitor
	ident *identify.Identifier
	rec   *vip.Reconciler

	events   chan monitor.Event
	reloadCh chan chan error
	stopping chan struct{} // closed when Run stops

	// Loop-owned state.
	cfg   *configs.Config
	owned *vip.OwnedSet
	addrs *vip.AddressKeeper // the VIP addresses the daemon added (nil until the first ensureAddresses)
	// planner runs the pool policy over time: warm-up, fail-open memory,
	// verdict events, and whether a tick has anything to do.
	planner *resolvers.Planner
	// dryRunFile is the table a dry run writes (nil unless DryRun).
	dryRunFile *vip.DryRunFile

	pf *prefetch.Service // cache refresh

	// hub holds the state the parts share (hub.Hub says who publishes
	// and who waits on what).
	hub *hub.Hub
	// intent is what operators said, in force, at store revision rev,
	// and rules its overrides' pool-policy form (loop-owned; the hub has
	// the copy others read); store persists it; responder answers GSLB
	// names under it.
	intent   intent.State
	rev      intent.Revision
	rules    []resolvers.Rule
	store    intent.Store
	changeCh chan change // intent changes for the loop (control.go)
	gslb     *responder.Responder
	fleet    *node.Node     // nil without [fleet]
	dnstap   *feed.Feed     // nil without [dnstap]
	bgp      *announce.Part // the route announcer
	flood    *alarms.Part   // the flood alarms; nil when off
	clients  *clients.Part  // the client actions (lbctl block, limit)
	// plans counts the plans computed by reconcile.
	plans int

	started  time.Time
	evlog    *control.EventLog
	metrics  *report.Metrics
	journal  *report.Journal // what happened: logs, events, counters
	registry *prometheus.Registry
	stats    *report.StatsCache
	// ctlLn and statusLn are the control socket and the status endpoint
	// (statusLn nil when turned off); Run serves them.
	ctlLn, statusLn net.Listener

	mu            sync.Mutex // guards the reload outcome below, read by other goroutines
	lastReload    time.Time
	lastReloadErr string
}

// eventLogSize is how many events the daemon keeps for lbctl events.
const eventLogSize = 2000

// New loads the configuration and prepares the daemon. It fails when the
// configuration is invalid, or when IPVS is not available and DryRun is not
// set; the error then says what to do.
func New(opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	closeProbe := func() error { return nil }
	if opts.Checkers == nil && opts.Probe != nil {
		probe := opts.Probe
		opts.Checkers = func(chk *configs.Check, addr netip.AddrPort) (check.Checker, error) {
			return check.Func(func(ctx context.Context) check.Result { return probe(ctx, addr, chk) }), nil
		}
	}
	if opts.Checkers == nil {
		// On Linux the UDP DNS checks go through probes' batch
		// engine (shared sockets, sendmmsg/recvmmsg); elsewhere each
		// probe opens its own socket. The engine starts with the first
		// probe, so a failed New leaks nothing.
		pr := probes.NewDNSProber()
		opts.Checkers, closeProbe = probes.NewBuilder(probes.Deps{DNS: pr}).Build, pr.Close
	}
	if opts.Identify == nil {
		opts.Identify = probes.Identify
	}
	if opts.TickInterval <= 0 {
		opts.TickInterval = time.Second
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	cfg, err := configs.Load(opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		opts:       opts,
		log:        opts.Logger,
		now:        opts.Now,
		dryRun:     opts.DryRun,
		events:     make(chan monitor.Event, 1024),
		reloadCh:   make(chan chan error),
		stopping:   make(chan struct{}),
		owned:      vip.NewOwnedSet(),
		closer:     func() error { return nil },
		closeProbe: closeProbe,
		changeCh:   make(chan change),
		planner:    resolvers.NewPlanner(),
		started:    opts.Now(),
		registry:   opts.Registry,
		pf:         prefetch.NewService(prefetch.ServiceOptions{Now: opts.Now, Logger: opts.Logger}),
	}
	d.evlog = control.NewEventLog(eventLogSize, opts.Now)
	d.hub = hub.New(func() hub.Facts { return d.mon.Status() })
	m, err := report.NewMetrics(opts.Registry, d.reportInput)
	if err != nil {
		return nil, fmt.Errorf("daemon: metrics: %w", err)
	}
	d.metrics = m
	d.journal = report.NewJournal(d.log, d.evlog, m)
	d.setLevel(cfg)
	d.journal.ConfigWarnings(cfg)
	switch {
	case opts.Client != nil:
		d.client = opts.Client
	case opts.DryRun:
		d.client = vip.NewMemClient()
	case len(cfg.VIPs) == 0 && !ownsServices(cfg):
		// A GSLB-only host: no VIP, no IPVS service of its own to
		// remove, so no netlink client. Adding a VIP takes a restart.
		d.client, d.noIPVS = vip.NewMemClient(), true
	default:
		kc, err := vip.NewKernelClient()
		if err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
		d.client, d.closer = kc, kc.Close
		d.applySettings(cfg)
	}
	d.stats = report.NewStatsCache(d.statsReader(), opts.Now, d.log)
	if err := os.MkdirAll(cfg.Daemon.StateDir, 0o750); err != nil {
		d.closer()
		return nil, fmt.Errorf("daemon: state dir: %w", err)
	}
	d.removeStateTemps(cfg.Daemon.StateDir)
	d.mon = monitor.New(monitor.Options{
		Now:      opts.Now,
		OnEvent:  d.onEvent,
		OnResult: func(k monitor.Key, r check.Result) { d.metrics.ObserveProbe(k.Check, r) },
		OnChange: func() { d.hub.Facts.Touch() },
		Logger:   d.log.With("component", "monitor"),
	})
	d.fleet, err = node.Open(node.Options{Config: cfg, Hub: d.hub, Monitor: d.mon, Checkers: opts.Checkers, InterfaceAddrs: opts.InterfaceAddrs,
		StatusAddr: d.StatusAddr, Journal: d.journal, Registerer: d.registry, Logger: d.log, Now: d.now, Started: d.started}) // nil without [fleet]
	if err != nil {
		d.closer()
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if f := d.fleet; f != nil {
		closer := d.closer
		d.closer = func() error { f.Close(); return closer() }
	}
	d.store = opts.Store
	if d.store == nil {
		file := intent.NewFileStore(cfg.Daemon.StateDir, intent.FileOptions{DiscardBad: opts.DiscardBadState, Now: opts.Now,
			OnDiscard: d.journal.StateDiscarded})
		d.store = file
		if d.fleet != nil {
			d.store = node.NewHostStore(d.fleet.Store(), file) // the host's drain stays the host's
		}
	}
	st, err := d.store.Load(context.Background())
	if err != nil {
		d.closer()
		return nil, fmt.Errorf("daemon: %w", err)
	}
	d.setOverrides(st.State, st.Revision)
	d.rec = vip.NewReconciler(d.client, d.owned.Has)
	// Made here, not in Run, so that Status never races their assignment.
	if d.clients, err = clients.New(clients.Options{Table: cfg.Actions.NftTable, NetNS: opts.ClientsNetNS, Hub: d.hub, Changer: d, Journal: d.journal,
		Registerer: d.registry, Logger: d.log.With("component", "clients"), Now: d.now}); err != nil {
		d.closer()
		return nil, fmt.Errorf("daemon: client actions: %w", err)
	}
	var rates func(context.Context) map[string]float64 // the VIPs' packet rates, the flood alarms' cheap trigger
	if !d.noIPVS {
		rates = func(ctx context.Context) map[string]float64 {
			return report.VIPPacketRates(d.Config(), d.stats.Read(ctx, d.rec.Snapshot().Table))
		}
	}
	if d.flood, err = alarms.New(alarms.Options{Config: cfg, Hub: d.hub, Rates: rates, GSLB: d, Clients: d.clients, Journal: d.journal,
		Registerer: d.registry, Logger: d.log.With("component", "flood"), Now: d.now}); err != nil {
		d.closer()
		return nil, fmt.Errorf("daemon: %w", err)
	}
	var versions responder.VersionRegister // the fleet's register the SOA serial follows; nil: the host's own count
	if d.fleet != nil {
		versions = d.fleet.SerialVersions()
	}
	d.gslb = responder.NewResponder(responder.ResponderOptions{Hub: d.hub, Registerer: d.registry, Logger: d.log.With("component", "gslb"), Now: d.now,
		Flood: d.flood.Pipeline(), Versions: versions, Changer: d, Journal: d.journal})
	bgp := announce.PartOptions{Hub: d.hub, Changer: d, Events: d.evlog, Registerer: d.registry, Logger: d.log.With("component", "bgp"), Now: d.now}
	if d.fleet != nil {
		bgp.Nodes, bgp.Self = d.fleet.WatchNodes, d.fleet.Name() // the other hosts' announcements
	}
	if d.bgp, err = announce.NewPart(bgp); err != nil {
		d.closer()
		return nil, fmt.Errorf("daemon: bgp metrics: %w", err)
	}
	d.ident = identify.New(identify.Options{
		Identify: opts.Identify,
		Answered: func(err error) bool { return errors.Is(err, probes.ErrNoVersion) },
		VendorOf: probes.VendorOf,
		Now:      opts.Now,
		Logger:   d.log,
	})
	d.gslb.Prepare(cfg) // the responder's topology, beside the targets
	targets, err := d.targets(cfg)
	if err == nil {
		err = d.check(cfg) // a configuration a component cannot serve is refused whole
	}
	if err != nil {
		d.closer()
		return nil, fmt.Errorf("daemon: %w", err)
	}
	d.install(cfg, targets, false)
	if err := d.owned.Restore(d.ownedPath()); err != nil {
		d.log.Warn("cannot load all owned IPVS services; services of removed VIPs may be left alone", "path", d.ownedPath(), "err", err)
	}
	if opts.DryRun {
		d.dryRunFile = vip.NewDryRunFile(filepath.Join(cfg.Daemon.StateDir, vip.DryRunFileName))
	}
	d.journal.IntentOrphans(cfg, d.intent)
	d.noteReload(nil)
	if err := d.listen(cfg); err != nil {
		d.closer()
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if d.dnstap, err = feed.New(feed.Options{Config: cfg, Flood: d.flood.Pipeline(), Consumer: opts.Dnstap, Registerer: d.registry,
		Logger: d.log.With("component", "dnstap"), Now: d.now}); err != nil {
		d.closeListeners()
		d.closer()
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return d, nil
}

// listen opens the control socket and the status endpoint.
func (d *Daemon) listen(cfg *configs.Config) error {
	ln, err := control.ListenUnix(cfg.Daemon.ControlSocket)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	d.ctlLn = ln
	if cfg.Daemon.StatusListen == "" {
		return nil
	}
	sl, err := net.Listen("tcp", cfg.Daemon.StatusListen)
	if err != nil {
		ln.Close()
		return fmt.Errorf("status endpoint (daemon.status_listen): %w", err)
	}
	d.statusLn = sl
	return nil
}

// closeListeners closes what listen opened (New failing after it).
func (d *Daemon) closeListeners() {
	d.ctlLn.Close()
	if d.statusLn != nil {
		d.statusLn.Close()
	}
}

// ControlSocket returns the control socket's path.
func (d *Daemon) ControlSocket() string { return d.ctlLn.Addr().String() }

// StatusAddr returns the status endpoint's address, or "" when it is off.
func (d *Daemon) StatusAddr() string {
	if d.statusLn == nil {
		return ""
	}
	return d.statusLn.Addr().String()
}

// Events returns the daemon's event log.
func (d *Daemon) Events() *control.EventLog { return d.evlog }

// Registry returns the registry /metrics serves.
func (d *Daemon) Registry() *prometheus.Registry { return d.registry }

// noteReload records the outcome of a configuration load (nil: applied).
func (d *Daemon) noteReload(err error) {
	now := d.now()
	d.mu.Lock()
	if err == nil {
		d.lastReload, d.lastReloadErr = now, ""
	} else {
		d.lastReloadErr = err.Error()
	}
	d.mu.Unlock()
	d.metrics.Reloaded(err == nil, now)
}

func (d *Daemon) setLevel(cfg *configs.Config) {
	if d.opts.LogLevel == nil {
		return
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(cfg.Daemon.LogLevel)); err == nil {
		d.opts.LogLevel.Set(l)
	}
}

// applySettings applies cfg's host-wide IPVS settings when the client is
// the kernel's.
func (d *Daemon) applySettings(cfg *configs.Config) {
	if kc, ok := d.client.(*vip.KernelClient); ok {
		if err := vip.ApplySettings(kc, cfg.IPVS); err != nil {
			d.log.Warn("cannot apply the IPVS kernel settings", "err", err)
		}
	}
}

// install makes cfg the running configuration: the planner's, the
// monitor's targets, the owned service keys, and the VIP addresses.
// reload tells a reload from the start (see resolvers.Planner.Configure).
func (d *Daemon) install(cfg *configs.Config, targets []monitor.Target, reload bool) {
	d.cfg = cfg
	d.planner.Configure(cfg, d.now(), reload)
	if d.fleet != nil {
		d.fleet.UpdateTargets(targets) // the members assigned to this node, and its canaries
	} else {
		d.mon.Update(targets)
	}
	d.hub.Config.Publish(cfg) // after the targets: the responder reads them with it
	d.ident.Update(resolvers.IdentifyTargets(cfg))
	for _, k := range resolvers.Compute(resolvers.Input{Config: cfg, Now: d.now()}).Table.Keys() {
		d.owned.Add(k)
	}
	d.ensureAddresses()
}

// targets builds the checker of every health target of cfg, resolver back
// ends and GSLB members: a check that cannot be built (a CA file that does
// not parse, no ICMP socket to be had) rejects the configuration, at start
// and on reload, rather than leave a target unchecked.
func (d *Daemon) targets(cfg *configs.Config) ([]monitor.Target, error) {
	return buildTargets(cfg, d.opts.Checkers)
}

// CheckTargets builds, with the real check kinds and then throws away,
// the checker of every health target of cfg: what lbdnsd -check-config
// runs after the configuration's own validation, so that a check the
// daemon could not build (a CA file without a certificate, no ICMP socket)
// is reported before a start or a reload would refuse it.
func CheckTargets(cfg *configs.Config) error {
	_, err := buildTargets(cfg, probes.NewBuilder(probes.Deps{}).Build)
	return err
}

func buildTargets(cfg *configs.Config, build func(*configs.Check, netip.AddrPort) (check.Checker, error)) ([]monitor.Target, error) {
	targets, err := resolvers.Targets(cfg, build)
	members, gerr := gslb.Targets(cfg, build)
	if err = errors.Join(err, gerr); err != nil {
		return nil, fmt.Errorf("health checks cannot be built: %w", err)
	}
	return append(targets, members...), nil
}

// onEvent queues a monitor event for the loop. Once the loop is stopping
// it drops events instead of blocking the monitor's shutdown.
func (d *Daemon) onEvent(ev monitor.Event) {
	select {
	case d.events <- ev:
	case <-d.stopping:
	}
}

// Run runs the daemon until ctx is done. It returns nil after a clean stop;
// the IPVS table is left in place.
func (d *Daemon) Run(ctx context.Context) error {
	defer func() {
		if err := d.closer(); err != nil {
			d.log.Warn("close ipvs client", "err", err)
		}
	}()
	// mctx outlives ctx until the announcer has drained and withdrawn
	// its routes: nothing stops serving while a route still points here.
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	monDone := make(chan error, 1)
	go func() { monDone <- d.mon.Run(mctx) }()
	identDone := make(chan error, 1)
	go func() { identDone <- d.ident.Run(mctx) }()
	d.pf.Start(mctx, d.cfg)
	feedDone := make(chan struct{})
	go func() { defer close(feedDone); d.pf.FollowPlans(mctx, d.hub.Plan) }()
	servingDone := make(chan struct{})
	go func() { defer close(servingDone); d.journal.FollowServing(mctx, d.hub, d.dryRun) }()
	servers := d.serve(mctx)
	fleetDone := d.fleet.Run(mctx, d.bgp.Beat())
	bgpDone := d.bgp.Run(ctx) // the outer ctx: it drains before mctx stops the rest
	floodDone := d.flood.Run(mctx)
	dnstapDone := d.dnstap.Run(mctx)
	clientsDone := d.clients.Run(mctx) // the kernel's table as the intent says, from the start
	watch := d.store.Watch(mctx)       // intent changed elsewhere (a fleet's store)

	mode := report.IPVSKernel
	switch {
	case d.dryRun:
		mode = report.IPVSDryRun
	case d.noIPVS:
		mode = report.IPVSNone
	}
	d.journal.Started(d.opts.ConfigPath, d.cfg, mode)

	tick := time.NewTicker(d.opts.TickInterval)
	defer tick.Stop()
	resync := time.NewTicker(d.cfg.IPVS.ResyncInterval.Duration)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			d.journal.Stopping()
			close(d.stopping)
			<-bgpDone // routes drained (drain_on_stop) and withdrawn before anything stops serving
			cancel()
			<-monDone
			<-identDone
			servers.Wait()
			<-fleetDone
			<-floodDone
			<-dnstapDone
			<-clientsDone
			<-feedDone
			<-servingDone
			d.pf.Stop()
			if err := d.closeProbe(); err != nil {
				d.log.Warn("close dns prober", "err", err)
			}
			d.journal.Stopped()
			return nil
		case ev := <-d.events:
			d.handleEvent(ctx, ev)
		case <-tick.C:
			d.opts.Notifier.Alive() // the watchdog is fed only while the loop runs
			d.handleTick(ctx)
		case <-resync.C:
			d.ensureAddresses() // the resync: addresses, then the whole table
			d.reconcile(ctx, true)
		case reply := <-d.reloadCh:
			err := d.opts.Notifier.Reload(func() error { return d.handleReload(ctx) })
			if err == nil {
				resync.Reset(d.cfg.IPVS.ResyncInterval.Duration)
			}
			reply <- err
		case call := <-d.changeCh:
			out, err := d.handleChange(ctx, call)
			call.reply <- changeResult{out: out, err: err}
		case st, ok := <-watch:
			if !ok {
				watch = nil // the store stopped watching: nothing more comes
				continue
			}
			d.handleWatch(ctx, st)
		}
	}
}

// Reload loads the config file again and applies it. A bad config is
// rejected whole, the running one stays, and the error lists every problem.
// Run must be running: the reload is done by its loop, and Reload waits for
// it until ctx is done.
func (d *Daemon) Reload(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case d.reloadCh <- reply:
	case <-d.stopping:
		return control.Errorf(control.Unavailable, "lbdnsd is stopping")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Plan returns the latest pool verdicts and desired table.
func (d *Daemon) Plan() resolvers.Plan {
	p, _ := d.hub.Plan.Load()
	return p
}

// Config returns the running configuration.
func (d *Daemon) Config() *configs.Config {
	c, _ := d.hub.Config.Load()
	return c
}

// Hub returns the state the daemon's parts share.
func (d *Daemon) Hub() *hub.Hub { return d.hub }

// Monitor returns the health monitor, for status.
func (d *Daemon) Monitor() *monitor.Monitor { return d.mon }

// Identifier returns the vendor identification of the back ends, for
// status.
func (d *Daemon) Identifier() *identify.Identifier { return d.ident }

// Applied returns the IPVS table the daemon believes the kernel holds for
// its services (in dry-run, the table it would have programmed).
func (d *Daemon) Applied() vip.Table { return d.rec.Table() }

// handleEvent logs ev and every other event already queued, then
// reconciles once: a burst of transitions (thousands at start-up, or a
// whole pool failing at once) costs one plan, not one per event.
func (d *Daemon) handleEvent(ctx context.Context, ev monitor.Event) {
	d.journal.StateChange(ev)
	for more := true; more; {
		select {
		case ev := <-d.events:
			d.journal.StateChange(ev)
		default:
			more = false
		}
	}
	d.reconcile(ctx, false)
}

// handleTick reconciles unless the plan in force is still current: a tick
// exists to notice facts going stale or probes turning slow, and when no
// target's fact changed there is nothing to recompute or apply.
func (d *Daemon) handleTick(ctx context.Context) {
	if d.planner.Current(d.rules, resolvers.Facts(d.mon.OfKind(resolvers.MonitorKind), d.now())) {
		return
	}
	d.reconcile(ctx, false)
}

// handleWatch makes st, the operator intent as changed elsewhere (another
// host sharing the store), the intent in force, and applies it.
func (d *Daemon) handleWatch(ctx context.Context, st intent.Stored) {
	if st.Revision <= d.rev {
		return // this loop's own Save, or one it already took
	}
	d.adoptIntent(ctx, st)
}

// adoptIntent makes st, the stored intent as another writer left it, the
// intent in force, and applies it.
func (d *Daemon) adoptIntent(ctx context.Context, st intent.Stored) {
	d.setOverrides(st.State, st.Revision)
	d.journal.IntentChanged(st.State)
	d.journal.IntentOrphans(d.cfg, st.State) // the responder follows the intent on the hub
	d.reconcile(ctx, false)
}

func (d *Daemon) handleReload(ctx context.Context) error {
	// A reload allocates tens of times its file's size: the GC is held
	// back meanwhile (heap goal 5x live, not 2x; bench/README.md,
	// "2026-11-30 (session 15): everything merged, the GC held back
	// during a reload, the answer path").
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	cfg, err := configs.Load(d.opts.ConfigPath)
	var targets []monitor.Target
	if err == nil {
		d.gslb.Prepare(cfg) // the responder's topology, beside the targets and their reconcile
		targets, err = d.targets(cfg)
	}
	if err == nil && d.noIPVS && len(cfg.VIPs) > 0 {
		err = fmt.Errorf("lbdnsd started without a [[vip]] and opened no IPVS client: restart it to serve the %d VIP(s) of %s", len(cfg.VIPs), d.opts.ConfigPath)
	}
	if err == nil {
		err = d.check(cfg) // applied whole or rejected whole: every component checks before any applies
	}
	if err != nil {
		d.journal.ReloadRejected(d.opts.ConfigPath, err)
		d.noteReload(err)
		return err
	}
	if cfg.KeepRestartOnly(d.cfg) {
		d.journal.RestartOnlyKept(d.cfg)
	}
	d.setLevel(cfg)
	d.applySettings(cfg)
	d.install(cfg, targets, true) // a warm planner stays warm: targets that kept their state are not held back
	d.journal.ReloadApplied(d.opts.ConfigPath, cfg)
	d.journal.ConfigWarnings(cfg)
	d.noteReload(nil)
	d.journal.IntentOrphans(cfg, d.intent)
	for _, c := range d.components() {
		c.Apply(cfg)
	}
	d.reconcile(ctx, false)
	return nil
}

// facts snapshots every target's fact at now.
func (d *Daemon) facts(now time.Time) map[resolvers.TargetKey]resolvers.Fact {
	out := make(map[resolvers.TargetKey]resolvers.Fact, len(d.cfg.Resolvers))
	maps.Insert(out, resolvers.Facts(d.mon.OfKind(resolvers.MonitorKind), now))
	return out
}

// reconcile runs one round of the pool policy: snapshot the facts, plan,
// report the verdicts that changed, bring the IPVS table to the plan, and
// tell the planner whether anything is left to retry. Until the warm-up is
// over the planner holds the table back, so that a restarted daemon adopts
// the kernel's table as it is.
func (d *Daemon) reconcile(ctx context.Context, full bool) {
	now := d.now()
	step := d.planner.Plan(d.facts(now), d.rules, now)
	plan := step.Plan
	d.plans++
	d.hub.Plan.Publish(plan)
	if !step.Apply {
		return
	}
	if step.JustWarmed {
		full = true
		d.journal.Warm(step.Decided)
	}
	d.journal.Verdicts(ctx, step.Events)
	var (
		ops []vip.Op
		err error
	)
	if full { // Sync itself resyncs when its cache is dirty
		ops, err = d.rec.Resync(ctx, plan.Table)
	} else {
		ops, err = d.rec.Sync(ctx, plan.Table)
	}
	d.journal.IPVSOps(ops, d.dryRun)
	if err != nil {
		d.journal.SyncFailed(err, d.rec.Stats().OpErrors)
	} else {
		if err := d.owned.PruneAndSave(d.ownedPath(), plan.Table, d.rec.Has); err != nil {
			d.log.Warn("cannot save owned IPVS services (retried unless only the directory sync failed)", "path", d.ownedPath(), "err", err)
		}
		// Clean only when nothing is left to retry at the next tick: a
		// reconciler cache the kernel surprised (the next Sync is a
		// Resync), an owned-services file not yet saved, a dry-run
		// table file not yet written.
		d.planner.Settle(!d.rec.Dirty() && !d.owned.Unsaved() && (d.dryRunFile == nil || d.dryRunFile.Written()))
	}
	d.publishVerdicts(plan)
	if d.dryRunFile != nil {
		if err := d.dryRunFile.Update(d.rec.Table(), len(ops) > 0); err != nil {
			d.log.Warn("cannot write dry-run table; will retry", "path", d.dryRunFile.Path(), "err", err)
		}
	}
}

// ensureAddresses brings the VIP addresses on their interfaces to the
// running configuration (vip.AddressKeeper): not in dry-run, nor with a
// test's client. The first call (at New) loads the record.
func (d *Daemon) ensureAddresses() {
	if d.dryRun || d.opts.Client != nil {
		return
	}
	if d.addrs == nil {
		d.addrs = vip.NewAddressKeeper(filepath.Join(d.cfg.Daemon.StateDir, vip.AddressesFile), d.log, d.now())
	}
	d.addrs.Ensure(d.cfg.VIPs)
}

// ownedPath is the file of the owned IPVS services (vip.OwnedSet).
func (d *Daemon) ownedPath() string { return filepath.Join(d.cfg.Daemon.StateDir, vip.OwnedFile) }

// publishVerdicts publishes the VIPs' serving verdicts over the table
// the kernel was given, when they changed.
func (d *Daemon) publishVerdicts(plan resolvers.Plan) {
	v := vip.Verdicts(d.cfg, d.rec.Table(), plan.PoolHealth(), d.dryRun)
	if old, _ := d.hub.VIPs.Load(); !slices.Equal(old, v) {
		d.hub.VIPs.Publish(v)
	}
}

// ownsServices reports whether the owned-services file of cfg's state
// directory lists IPVS services (of VIPs removed while the daemon was
// down, which it must remove): a daemon without VIPs then still needs the
// kernel's IPVS. A file that cannot be read counts as owning some.
func ownsServices(cfg *configs.Config) bool {
	s, err := vip.LoadOwned(filepath.Join(cfg.Daemon.StateDir, vip.OwnedFile))
	return err != nil || len(s.Keys()) > 0
}
