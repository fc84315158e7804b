// Package node is this LB host's part in a fleet of LB hosts ([fleet]):
// the etcd client and the host's keys, the store of the operator intent
// the fleet shares, the heartbeat, the majority votes on the GSLB
// members (which members this host probes, its canaries, its votes, and
// the fleet's verdicts, published on the hub as forced member states),
// the fleet's status and metrics. The pure rules are package fleet's;
// the etcd I/O is package etcdfleet's; the daemon only opens a Node,
// hands it the monitor's targets and runs it.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/check"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/fleet"
	"lbdns/fleet/etcdfleet"
	"lbdns/hub"
	"lbdns/intent"
	"lbdns/monitor"
)

// Monitor is what the fleet needs of the health monitor: this host's
// own statuses (its votes), the canaries', and the targets to probe.
type Monitor interface {
	// Status returns every target's status by key.
	Status() map[monitor.Key]monitor.TargetStatus
	// EachKind calls f with the status of every target of kind.
	EachKind(kind string, f func(monitor.TargetStatus))
	// Update makes targets the monitored set.
	Update(targets []monitor.Target)
}

// Journal is where the fleet says what happened: the link to etcd lost
// and back, and nodes joining and leaving the fleet view.
type Journal interface {
	etcdfleet.LinkEvents
	// FleetMembership: the nodes that joined and left the fleet view.
	FleetMembership(joined, left []string)
}

// Options are what a Node is opened with.
type Options struct {
	// Config is the configuration at start (its [fleet] section, the
	// state directory for the local copy of the intent).
	Config *configs.Config
	// Hub is where the Node reads the configuration, the intent, the
	// responder's state and the facts, and publishes the forced member
	// states (Hub.Forced).
	Hub *hub.Hub
	// Monitor is the health monitor the Node gives its targets to.
	Monitor Monitor
	// Checkers builds the canaries' checks.
	Checkers func(chk *configs.Check, addr netip.AddrPort) (check.Checker, error)
	// InterfaceAddrs reads this host's interface addresses (the canary
	// choice and self-exclusion). Default: the host's interfaces.
	InterfaceAddrs func() ([]netip.Addr, error)
	// StatusAddr returns the status endpoint's address as bound ("":
	// off); read when the canaries are chosen.
	StatusAddr func() string
	// Journal hears the link's and the membership's events.
	Journal Journal
	// Registerer receives the fleet's metrics.
	Registerer prometheus.Registerer
	// Logger receives the logs (component fleet). Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Started is when the daemon started (said in the heartbeat).
	Started time.Time
}

// Node is this host's part in a fleet. Open it with Open; the methods of
// a nil *Node are those of a host without [fleet].
type Node struct {
	o    Options
	cfg  *configs.Fleet
	cli  *clientv3.Client
	keys etcdfleet.Keys
	log  *slog.Logger
	// hb is the heartbeat once it started (nil before).
	hb atomic.Pointer[etcdfleet.Heartbeater]
	// link is the node's link to etcd (etcdfleet.LossStore's).
	link *etcdfleet.Link
	// store is the fleet's store of the shared intent.
	store intent.Store
	votes *votes
}

// Open connects to the fleet's etcd when o.Config has [fleet]; without
// it, it does nothing and returns nil. An etcd that cannot be reached is
// no error: the store then serves the local copy of the intent. Close
// closes the client.
func Open(o Options) (*Node, error) {
	f := o.Config.Fleet
	if f == nil {
		return nil, nil
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.InterfaceAddrs == nil {
		o.InterfaceAddrs = interfaceAddrs
	}
	if o.StatusAddr == nil {
		o.StatusAddr = func() string { return "" }
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.DialTimeout.Duration+time.Second)
	defer cancel()
	cli, err := etcdfleet.Open(ctx, f)
	var unreachable *etcdfleet.UnreachableError
	if err != nil && !errors.As(err, &unreachable) {
		return nil, err
	}
	n := &Node{o: o, cfg: f, cli: cli, keys: etcdfleet.KeysOf(f.Prefix, f.Cluster, f.Name), log: o.Logger.With("component", "fleet")}
	n.votes = newVotes(n)
	n.link = etcdfleet.NewLink(o.Now, o.Journal, func() uint64 { in, _ := o.Hub.Intent.Load(); return in.Revision })
	n.store = etcdfleet.NewLossStore(etcdfleet.LossStoreOptions{
		Inner:  etcdfleet.NewStore(cli, etcdfleet.StoreOptions{Keys: n.keys, Resync: f.ResyncInterval.Duration, Logger: n.log}),
		Client: cli, Key: n.keys.Fleet, Link: n.link, CopyPath: filepath.Join(o.Config.Daemon.StateDir, etcdfleet.CopyFile), Node: f.Name,
		Now: o.Now, Logger: n.log, Unreachable: err,
	})
	if err := n.register(); err != nil {
		cli.Close()
		return nil, err
	}
	if unreachable != nil { // Load serves the local copy
		return n, nil
	}
	version, old, err := etcdfleet.ServerVersion(ctx, cli)
	switch {
	case err != nil:
		n.log.Warn("cannot tell the etcd server's version", "err", err)
	case old:
		n.log.Warn("the etcd server is older than 3.5: end of life, and its watches may duplicate or lose events; upgrade it", "etcd_version", version)
	}
	n.log.Info("in a fleet: operator intent is shared through etcd", "node", f.Name, "location", f.Location, "cluster", f.Cluster, "prefix", f.Prefix, "etcd_version", version)
	return n, nil
}

// Close closes the etcd client.
func (n *Node) Close() error {
	if n == nil {
		return nil
	}
	return n.cli.Close()
}

// Name is the node's name in the fleet ([fleet] name).
func (n *Node) Name() string { return n.cfg.Name }

// Store is the fleet's store of the shared intent.
func (n *Node) Store() intent.Store { return n.store }

// SerialVersions returns the fleet's register of configuration versions
// the responder's SOA serial follows.
func (n *Node) SerialVersions() *etcdfleet.SerialVersions {
	return etcdfleet.NewSerialVersions(n.cli, n.cfg.Prefix)
}

// WatchNodes delivers the fleet view's nodes on every change until ctx
// is done (the route announcer's view of the other hosts).
func (n *Node) WatchNodes(ctx context.Context) <-chan []fleet.Node {
	return etcdfleet.WatchNodes(ctx, n.cli, n.cfg.Prefix, etcdfleet.WatchOptions{Logger: n.log, Now: n.o.Now})
}

// register registers the fleet's metrics.
func (n *Node) register() error {
	if n.o.Registerer == nil {
		return nil
	}
	alive := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_heartbeat_alive",
		Help: "1 while this node's fleet heartbeat lease is alive in etcd, 0 while it is lost (etcd unreachable) or not started.",
	}, func() float64 {
		if hb := n.hb.Load(); hb != nil && hb.Alive() {
			return 1
		}
		return 0
	})
	rev := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_intent_revision",
		Help: "The revision of the fleet's shared operator intent this node applied.",
	}, func() float64 {
		in, _ := n.o.Hub.Intent.Load()
		return float64(in.Revision)
	})
	reachable := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_etcd_reachable",
		Help: "1 while this node reaches the fleet's etcd, 0 while it cannot (it then serves the intent it applied last and refuses intent changes).",
	}, func() float64 {
		if e := n.Etcd(); e != nil && e.Reachable {
			return 1
		}
		return 0
	})
	since := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_etcd_unreachable_seconds",
		Help: "How long this node has been unable to reach the fleet's etcd (0 while it reaches it).",
	}, func() float64 {
		if e := n.Etcd(); e != nil && !e.Reachable {
			return n.o.Now().Sub(e.Since).Seconds()
		}
		return 0
	})
	for _, c := range append([]prometheus.Collector{alive, rev, reachable, since}, n.votes.collectors()...) {
		if err := n.o.Registerer.Register(c); err != nil {
			return fmt.Errorf("fleet metrics: %w", err)
		}
	}
	return nil
}

// Etcd is the node's link to etcd for status (nil without [fleet]).
func (n *Node) Etcd() *control.FleetEtcd {
	if n == nil || n.link == nil {
		return nil
	}
	return n.link.State()
}

// Run keeps the node's heartbeat and its votes until ctx is done; the
// channel is closed when both have stopped and the lease is revoked.
// announced is what this host announces over BGP (said in the
// heartbeat); nil: nothing.
func (n *Node) Run(ctx context.Context, announced *hub.Value[fleet.Beat]) <-chan struct{} {
	done := make(chan struct{})
	if n == nil {
		close(done)
		return done
	}
	if announced == nil {
		announced = hub.NewValue[fleet.Beat]()
	}
	var wg sync.WaitGroup
	wg.Go(func() { n.follow(ctx, announced) })
	wg.Go(func() { n.votes.run(ctx) })
	go func() {
		defer close(done)
		wg.Wait()
	}()
	return done
}

// follow starts the heartbeat (retrying while etcd cannot be reached)
// and publishes a new one whenever the configuration, the intent, the
// responder's serial or the host's announcements change.
func (n *Node) follow(ctx context.Context, announced *hub.Value[fleet.Beat]) {
	h := n.o.Hub
	var cfgVer, inVer, rsVer, annVer uint64
	hash := ""
	var sections map[string]string
	beat := func() fleet.Heartbeat {
		cfg, cv := h.Config.Load()
		if cv != cfgVer || hash == "" {
			sum, sec, err := fleet.ConfigHashes(cfg)
			if err != nil {
				n.log.Warn("cannot hash the configuration for the fleet heartbeat", "err", err)
			}
			hash, sections, cfgVer = sum, sec, cv
		}
		in, iv := h.Intent.Load()
		rs, rv := h.Responder.Load()
		inVer, rsVer = iv, rv
		hb := n.heartbeat(cfg, hash, in.Revision, rs.Serial)
		hb.ConfigSections = sections
		var ann fleet.Beat
		ann, annVer = announced.Load()
		hb.Drained, hb.Announced = ann.Drained, ann.Announced
		return hb
	}
	var hb *etcdfleet.Heartbeater
	for hb == nil {
		sctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout.Duration)
		started, err := etcdfleet.StartHeartbeat(sctx, n.cli, etcdfleet.HeartbeatOptions{Keys: n.keys, TTL: n.cfg.LeaseTTL.Duration, Logger: n.log, Now: n.o.Now}, beat())
		cancel()
		if err == nil {
			hb = started
			break
		}
		n.log.Warn("cannot start the fleet heartbeat; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	n.hb.Store(hb)
	defer hb.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.Config.Changed(cfgVer):
		case <-h.Intent.Changed(inVer):
		case <-h.Responder.Changed(rsVer):
		case <-n.votes.beat: // withdrawn, or voting again
		case <-announced.Changed(annVer): // what this host announces
		}
		hb.Publish(beat())
	}
}

// heartbeat is what this node says of itself to the fleet: its [fleet]
// names, its build, the hash of its configuration, the intent revision
// it applied and the SOA serial it answers.
func (n *Node) heartbeat(cfg *configs.Config, configHash string, intentRev uint64, serial uint32) fleet.Heartbeat {
	f := n.cfg
	canary, canaries := n.votes.advertised(cfg)
	return fleet.Heartbeat{
		Name: f.Name, Location: f.Location, Cluster: f.Cluster,
		Version: fleet.Version(), ConfigHash: configHash, IntentRevision: intentRev, Serial: serial,
		Started: n.o.Started.UTC(), Canary: canary, Withdrawn: n.votes.withdrawnNow(), Canaries: canaries,
	}
}

// Status answers GET /v1/fleet: the fleet view read from etcd now and
// this node's part in the votes (a host without [fleet]: off).
func (n *Node) Status(ctx context.Context) *control.FleetStatus {
	if n == nil {
		return &control.FleetStatus{Nodes: []control.FleetNode{}}
	}
	hb := n.hb.Load()
	st := &control.FleetStatus{On: true, Node: n.cfg.Name, Location: n.cfg.Location, Cluster: n.cfg.Cluster, Heartbeat: hb != nil && hb.Alive(), Etcd: n.Etcd(), Nodes: []control.FleetNode{}}
	n.votes.fillStatus(st)
	if lost, _ := n.link.LostSince(); lost {
		st.Error = "etcd unreachable: the fleet view cannot be read (this node serves the intent it applied last)"
		return st
	}
	ctx, cancel := context.WithTimeout(ctx, etcdfleet.SaveTimeout)
	defer cancel()
	nodes, err := etcdfleet.Nodes(ctx, n.cli, n.cfg.Prefix, n.o.Now())
	if err != nil {
		st.Error = fmt.Sprintf("%v", err)
		return st
	}
	for _, x := range nodes {
		st.Nodes = append(st.Nodes, control.FleetNode{
			Name: x.Name, Location: x.Location, Cluster: x.Cluster, Version: x.Version, ConfigHash: x.ConfigHash, ConfigSections: x.ConfigSections,
			IntentRevision: x.IntentRevision, CurrentRevision: x.CurrentRevision, Serial: x.Serial,
			Started: x.Started, Beat: x.Beat, AgeSeconds: x.Age.Seconds(), Odd: x.Odd, Withdrawn: x.Withdrawn, Drained: x.Drained,
			Canary: x.Canary, Canaries: x.Canaries,
		})
	}
	// The fleet's canaries (this node's own count was said above, from
	// its latest pass rather than its last heartbeat).
	view := make([]fleet.Node, len(nodes))
	for i, x := range nodes {
		if x.Name == n.cfg.Name {
			x.Canaries = nil
		}
		view[i] = x
	}
	st.CanaryWarnings = append(st.CanaryWarnings, fleet.CanaryWarnings(view)...)
	return st
}

// Fleet answers GET /v1/fleet (control.FleetBackend): Status.
func (n *Node) Fleet(ctx context.Context) (*control.FleetStatus, error) { return n.Status(ctx), nil }

// FillMembers adds the fleet's verdict and votes to every member of
// pools (nothing outside a fleet).
func (n *Node) FillMembers(pools []control.GSLBPool) {
	if n == nil {
		return
	}
	n.votes.fillMembers(pools)
}

// UpdateTargets gives the monitor the targets of the configuration in
// force, the GSLB members filtered to those assigned to this node, and
// its canaries beside them.
func (n *Node) UpdateTargets(targets []monitor.Target) {
	n.votes.updateTargets(targets)
}
