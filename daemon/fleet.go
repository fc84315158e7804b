package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/announce"
	"lbdns/configs"
	"lbdns/control"
	"lbdns/fleet"
	"lbdns/fleet/etcdfleet"
	"lbdns/intent"
	"lbdns/responder"
)

// fleetNode is the daemon's place in a fleet of LB hosts ([fleet]): the
// etcd client, the node's keys and its heartbeat.
type fleetNode struct {
	cfg  *configs.Fleet
	cli  *clientv3.Client
	keys etcdfleet.Keys
	log  *slog.Logger
	// hb is the heartbeat once it started (nil before).
	hb atomic.Pointer[etcdfleet.Heartbeater]
	// link is the node's link to etcd (etcdfleet.LossStore's).
	link *etcdfleet.Link
}

// openFleet connects to the fleet's etcd when cfg has [fleet] and
// returns the store of the node's shared intent; without [fleet] it does
// nothing and returns nil. The client is closed with the daemon's
// closer.
func (d *Daemon) openFleet(cfg *configs.Config) (intent.Store, error) {
	f := cfg.Fleet
	if f == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.DialTimeout.Duration+time.Second)
	defer cancel()
	cli, err := etcdfleet.Open(ctx, f)
	var unreachable *etcdfleet.UnreachableError
	if err != nil && !errors.As(err, &unreachable) {
		return nil, err
	}
	n := &fleetNode{cfg: f, cli: cli, keys: etcdfleet.KeysOf(f.Prefix, f.Cluster, f.Name), log: d.log.With("component", "fleet")}
	d.fleet = n
	d.votes = newFleetVotes(d, n)
	closer := d.closer
	d.closer = func() error { cli.Close(); return closer() }
	if err := d.registerFleetMetrics(); err != nil {
		return nil, err
	}
	n.link = etcdfleet.NewLink(d.now, d.journal, func() uint64 { in, _ := d.hub.Intent.Load(); return in.Revision })
	store := etcdfleet.NewLossStore(etcdfleet.LossStoreOptions{
		Inner:  etcdfleet.NewStore(cli, etcdfleet.StoreOptions{Keys: n.keys, Resync: f.ResyncInterval.Duration, Logger: n.log}),
		Client: cli, Key: n.keys.Fleet, Link: n.link, CopyPath: filepath.Join(cfg.Daemon.StateDir, etcdfleet.CopyFile), Node: f.Name,
		Now: d.now, Logger: n.log, Unreachable: err,
	})
	if unreachable != nil { // Load serves the local copy
		return store, nil
	}
	version, old, err := etcdfleet.ServerVersion(ctx, cli)
	switch {
	case err != nil:
		n.log.Warn("cannot tell the etcd server's version", "err", err)
	case old:
		n.log.Warn("the etcd server is older than 3.5: end of life, and its watches may duplicate or lose events; upgrade it", "etcd_version", version)
	}
	n.log.Info("in a fleet: operator intent is shared through etcd", "node", f.Name, "location", f.Location, "cluster", f.Cluster, "prefix", f.Prefix, "etcd_version", version)
	return store, nil
}

// serialVersions returns the fleet's register of configuration versions
// the responder's SOA serial follows (nil without [fleet]: the host's
// own count).
func (d *Daemon) serialVersions() responder.VersionRegister {
	if d.fleet == nil {
		return nil
	}
	return etcdfleet.NewSerialVersions(d.fleet.cli, d.fleet.cfg.Prefix)
}

// registerFleetMetrics registers the fleet's gauges on the daemon's
// registry.
func (d *Daemon) registerFleetMetrics() error {
	alive := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_heartbeat_alive",
		Help: "1 while this node's fleet heartbeat lease is alive in etcd, 0 while it is lost (etcd unreachable) or not started.",
	}, func() float64 {
		if hb := d.fleet.hb.Load(); hb != nil && hb.Alive() {
			return 1
		}
		return 0
	})
	rev := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_intent_revision",
		Help: "The revision of the fleet's shared operator intent this node applied.",
	}, func() float64 {
		in, _ := d.hub.Intent.Load()
		return float64(in.Revision)
	})
	for _, c := range append(append([]prometheus.Collector{alive, rev}, d.fleetLossMetrics()...), d.votes.collectors()...) {
		if err := d.registry.Register(c); err != nil {
			return fmt.Errorf("fleet metrics: %w", err)
		}
	}
	return nil
}

// runFleet keeps the node's heartbeat until ctx is done (nothing
// without [fleet]); the channel is closed when it has stopped and its
// lease is revoked.
func (d *Daemon) runFleet(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if d.fleet == nil {
		close(done)
		return done
	}
	var wg sync.WaitGroup
	wg.Go(func() { d.followFleet(ctx) })
	wg.Go(func() { d.votes.run(ctx) })
	go func() {
		defer close(done)
		wg.Wait()
	}()
	return done
}

// followFleet starts the heartbeat (retrying while etcd cannot be
// reached) and publishes a new one whenever the configuration, the
// intent, the responder's serial or the host's announcements change.
func (d *Daemon) followFleet(ctx context.Context) {
	n := d.fleet
	var cfgVer, inVer, rsVer, annVer uint64
	hash := ""
	var sections map[string]string
	beat := func() fleet.Heartbeat {
		cfg, cv := d.hub.Config.Load()
		if cv != cfgVer || hash == "" {
			h, sec, err := fleet.ConfigHashes(cfg)
			if err != nil {
				n.log.Warn("cannot hash the configuration for the fleet heartbeat", "err", err)
			}
			hash, sections, cfgVer = h, sec, cv
		}
		in, iv := d.hub.Intent.Load()
		rs, rv := d.hub.Responder.Load()
		inVer, rsVer = iv, rv
		hb := d.fleetHeartbeat(hash, in.Revision, rs.Serial)
		hb.ConfigSections = sections
		var ann announce.Beat
		ann, annVer = d.bgp.ann.Beat().Load()
		hb.Drained, hb.Announced = ann.Drained, ann.Announced
		return hb
	}
	var hb *etcdfleet.Heartbeater
	for hb == nil {
		sctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout.Duration)
		h, err := etcdfleet.StartHeartbeat(sctx, n.cli, etcdfleet.HeartbeatOptions{Keys: n.keys, TTL: n.cfg.LeaseTTL.Duration, Logger: n.log, Now: d.now}, beat())
		cancel()
		if err == nil {
			hb = h
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
		case <-d.hub.Config.Changed(cfgVer):
		case <-d.hub.Intent.Changed(inVer):
		case <-d.hub.Responder.Changed(rsVer):
		case <-d.votes.beat: // withdrawn, or voting again
		case <-d.bgp.ann.Beat().Changed(annVer): // what this host announces
		}
		hb.Publish(beat())
	}
}

// fleetHeartbeat is what this node says of itself to the fleet: its
// [fleet] names, its build, the hash of its configuration, the intent
// revision it applied and the SOA serial it answers.
func (d *Daemon) fleetHeartbeat(configHash string, intentRev uint64, serial uint32) fleet.Heartbeat {
	f := d.fleet.cfg
	canary, canaries := d.votes.advertised(d.Config())
	return fleet.Heartbeat{
		Name: f.Name, Location: f.Location, Cluster: f.Cluster,
		Version: fleet.Version(), ConfigHash: configHash, IntentRevision: intentRev, Serial: serial,
		Started: d.started.UTC(), Canary: canary, Withdrawn: d.votes.withdrawnNow(), Canaries: canaries,
	}
}

// Fleet reads the fleet view (GET /v1/fleet) and this node's part in
// the votes.
func (d *Daemon) Fleet(ctx context.Context) (*control.FleetStatus, error) {
	return backend{d}.Fleet(ctx)
}

// Fleet answers GET /v1/fleet: the fleet view read from etcd now.
func (b backend) Fleet(ctx context.Context) (*control.FleetStatus, error) {
	n := b.d.fleet
	if n == nil {
		return &control.FleetStatus{Nodes: []control.FleetNode{}}, nil
	}
	hb := n.hb.Load()
	st := &control.FleetStatus{On: true, Node: n.cfg.Name, Location: n.cfg.Location, Cluster: n.cfg.Cluster, Heartbeat: hb != nil && hb.Alive(), Etcd: b.d.fleetEtcd(), Nodes: []control.FleetNode{}}
	b.d.votes.fillStatus(st)
	if lost, _ := n.link.LostSince(); lost {
		st.Error = "etcd unreachable: the fleet view cannot be read (this node serves the intent it applied last)"
		return st, nil
	}
	ctx, cancel := context.WithTimeout(ctx, etcdfleet.SaveTimeout)
	defer cancel()
	nodes, err := etcdfleet.Nodes(ctx, n.cli, n.cfg.Prefix, b.d.now())
	if err != nil {
		st.Error = fmt.Sprintf("%v", err)
		return st, nil
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
	return st, nil
}
