package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/control"
	"lbdns/fleet/etcdfleet"
	"lbdns/intent"
	"lbdns/internal/atomicfile"
	"lbdns/report"
)

// What a node in a fleet does when it loses etcd (or starts without it):
// it keeps serving the intent it applied last, says so (status, page,
// metric, journal), refuses every intent change at once (the fleet's
// intent lives in etcd only, never on one host alone), and reads the
// intent whole when etcd is back, also when the revisions it missed were
// compacted away. To start without etcd it keeps a copy of the intent it
// last applied in its state directory (FleetCopyFile).

// FleetCopyFile is the file in daemon.state_dir where a node in a fleet
// keeps a copy of the intent it last applied from etcd, with its
// revision: what it serves when it starts while etcd cannot be reached.
// It is never written back to etcd.
const FleetCopyFile = "fleet-intent.json"

const (
	// etcdProbeEvery is how often the node checks that etcd answers (a
	// linearizable read: a member without a leader does not count);
	// etcdProbeTimeout bounds one check.
	etcdProbeEvery   = time.Second
	etcdProbeTimeout = time.Second
	// etcdLostAfter is how many checks in a row must fail before etcd is
	// called unreachable (a write that fails for it says so at once).
	etcdLostAfter = 2
	// fleetSaveTimeout bounds an intent change sent to etcd: the daemon's
	// loop waits for it, and an operator for the refusal.
	fleetSaveTimeout = 2 * time.Second
)

// etcdLink is what the node knows of its link to etcd. Its methods are
// safe for concurrent use.
type etcdLink struct {
	now     func() time.Time
	journal *report.Journal
	// rev is the intent revision in force (the hub's).
	rev func() uint64

	mu        sync.Mutex
	reachable bool
	since     time.Time
	err       string
	fails     int
	source    string
	// back receives a value (without blocking) when etcd becomes
	// reachable again.
	back chan struct{}
}

func newEtcdLink(now func() time.Time, j *report.Journal, rev func() uint64) *etcdLink {
	return &etcdLink{now: now, journal: j, rev: rev, reachable: true, since: now(), source: control.IntentFromEtcd, back: make(chan struct{}, 1)}
}

// startedWithout records that the node started without etcd, serving
// the intent of source.
func (l *etcdLink) startedWithout(cause error, rev uint64, source string) {
	l.mu.Lock()
	l.reachable, l.since, l.err, l.source = false, l.now(), cause.Error(), source
	l.mu.Unlock()
	l.journal.FleetStartedWithoutEtcd(cause, rev, source)
}

// ok records that etcd answered.
func (l *etcdLink) ok() {
	l.mu.Lock()
	l.fails = 0
	if l.reachable {
		l.mu.Unlock()
		return
	}
	lost := l.now().Sub(l.since)
	l.reachable, l.since, l.err = true, l.now(), ""
	l.mu.Unlock()
	l.journal.FleetEtcdBack(lost)
	select {
	case l.back <- struct{}{}:
	default:
	}
}

// fail records that etcd did not answer; certain (a write that failed
// for it) calls it unreachable at once, a failed check only after
// etcdLostAfter in a row.
func (l *etcdLink) fail(err error, certain bool) {
	l.mu.Lock()
	l.fails++
	if !l.reachable {
		l.err = err.Error()
		l.mu.Unlock()
		return
	}
	if !certain && l.fails < etcdLostAfter {
		l.mu.Unlock()
		return
	}
	l.reachable, l.since, l.err = false, l.now(), err.Error()
	source := l.source
	l.mu.Unlock()
	l.journal.FleetEtcdLost(err, l.rev(), source)
}

// fromEtcd records that the intent in force was read from etcd.
func (l *etcdLink) fromEtcd() {
	l.mu.Lock()
	l.source = control.IntentFromEtcd
	l.mu.Unlock()
}

// state is the link as status and GET /v1/fleet show it.
func (l *etcdLink) state() *control.FleetEtcd {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &control.FleetEtcd{Reachable: l.reachable, Since: l.since.UTC(), Error: l.err, IntentRevision: l.rev(), IntentSource: l.source}
}

// lostSince returns whether etcd is unreachable, and since when.
func (l *etcdLink) lostSince() (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.reachable, l.since
}

// lossStore is the fleet's intent.Store as the daemon uses it: the etcd
// store, with the link's checks, the fast refusal of changes while etcd
// is lost, the local copy of the intent applied last, and the whole
// read when etcd is back.
type lossStore struct {
	inner *etcdfleet.Store
	cli   *clientv3.Client
	// key is what the link's check reads (the fleet's intent key).
	key  string
	link *etcdLink
	copy *intentCopy
	log  *slog.Logger
	// unreachable is Open's error when etcd could not be reached at
	// start (nil when it could).
	unreachable error
	// fromCopy is set when Load served the local copy: Watch reads etcd
	// whole as soon as it answers.
	fromCopy bool
}

var _ intent.Store = (*lossStore)(nil)

// newLossStore wraps the etcd store of node n; unreachable is Open's
// error when etcd could not be reached.
func (d *Daemon) newLossStore(n *fleetNode, inner *etcdfleet.Store, stateDir string, unreachable error) *lossStore {
	n.link = newEtcdLink(d.now, d.journal, func() uint64 { in, _ := d.hub.Intent.Load(); return in.Revision })
	return &lossStore{inner: inner, cli: n.cli, key: n.keys.Fleet, link: n.link, log: n.log,
		copy: &intentCopy{path: filepath.Join(stateDir, FleetCopyFile), node: n.cfg.Name, now: d.now, log: n.log}, unreachable: unreachable}
}

// Load reads the intent from etcd; when etcd cannot be reached it
// serves the local copy (or no intent without one), and says so. Intent
// in etcd, or a local copy, that cannot be parsed is an error.
func (s *lossStore) Load(ctx context.Context) (intent.Stored, error) {
	err := s.unreachable
	if err == nil {
		st, lerr := s.inner.Load(ctx)
		if lerr == nil {
			s.copy.save(st)
			return st, nil
		}
		if !etcdfleet.IsUnreachable(lerr) {
			return intent.Stored{}, lerr
		}
		err = lerr
	}
	st, found, cerr := s.copy.load()
	if cerr != nil {
		return intent.Stored{}, fmt.Errorf("fleet: etcd cannot be reached (%v) and the local copy of the intent cannot be used: %w (remove it to start without intent)", err, cerr)
	}
	source := control.IntentFromLocalCopy
	if !found {
		source = control.IntentFromNone
	}
	s.fromCopy = true
	s.link.startedWithout(err, uint64(st.Revision), source)
	return st, nil
}

// Save refuses at once while etcd is unreachable; otherwise it writes
// st within fleetSaveTimeout, and keeps the local copy.
func (s *lossStore) Save(ctx context.Context, st intent.State, expected intent.Revision) (intent.Revision, error) {
	if lost, since := s.link.lostSince(); lost {
		return 0, &control.Error{Code: http.StatusServiceUnavailable, Unavailable: control.UnavailableEtcd, Message: fmt.Sprintf(
			"the fleet's etcd is unreachable (since %s, %s ago): the fleet's intent is kept in etcd only, so nothing was changed on this host or elsewhere; retry when etcd is back (lbctl fleet status)",
			since.UTC().Format(time.RFC3339), s.link.now().Sub(since).Round(time.Second))}
	}
	ctx, cancel := context.WithTimeout(ctx, fleetSaveTimeout)
	defer cancel()
	rev, err := s.inner.Save(ctx, st, expected)
	if err != nil {
		if etcdfleet.IsUnreachable(err) {
			s.link.fail(err, true)
			return 0, &control.Error{Code: http.StatusServiceUnavailable, Unavailable: control.UnavailableEtcd, Message: fmt.Sprintf(
				"the fleet's etcd did not confirm the change within %s (%v): it is not in force; had it reached etcd, every host applies it from there once etcd answers (lbctl fleet status)",
				fleetSaveTimeout, err)}
		}
		return 0, err
	}
	s.copy.save(intent.Stored{State: st, Revision: rev})
	return rev, nil
}

// Watch checks the link every etcdProbeEvery and delivers every revision
// of the intent saved elsewhere, each at most once and in order; when
// the daemon started from the local copy it first delivers the intent
// read whole from etcd once it answers, and whenever etcd comes back
// after a loss it reads the intent whole and delivers it when it is
// newer than what was delivered.
func (s *lossStore) Watch(ctx context.Context) <-chan intent.Stored {
	out := make(chan intent.Stored)
	go func() {
		defer close(out)
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() { s.check(ctx) })
		s.follow(ctx, out)
	}()
	return out
}

// follow is Watch's delivery (see Watch).
func (s *lossStore) follow(ctx context.Context, out chan<- intent.Stored) {
	var sent intent.Revision
	send := func(st intent.Stored) bool {
		if st.Revision <= sent && sent != 0 {
			return true
		}
		s.copy.save(st)
		select {
		case out <- st:
			sent = st.Revision
			return true
		case <-ctx.Done():
			return false
		}
	}
	if s.fromCopy {
		var st intent.Stored
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.link.back:
			}
			var err error
			if st, err = s.inner.Load(ctx); err == nil {
				break
			}
			s.log.Warn("etcd answers again but the fleet's intent cannot be read whole; retrying", "err", err)
			select { // try again at the next check that works
			case s.link.back <- struct{}{}:
			default:
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(etcdProbeEvery):
			}
		}
		s.link.fromEtcd()
		if !send(st) {
			return
		}
	}
	in := s.inner.Watch(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case st, ok := <-in:
			if !ok || !send(st) {
				return
			}
		case <-s.link.back:
			st, err := s.inner.Load(ctx)
			if err != nil {
				s.log.Warn("cannot read the fleet's intent whole after etcd came back; the watch catches up", "err", err)
				continue
			}
			if !send(st) {
				return
			}
		}
	}
}

// check reads the fleet's key every etcdProbeEvery and tells the link.
func (s *lossStore) check(ctx context.Context) {
	t := time.NewTicker(etcdProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, etcdProbeTimeout)
		_, err := s.cli.Get(cctx, s.key, clientv3.WithCountOnly())
		cancel()
		switch {
		case err == nil:
			s.link.ok()
		case ctx.Err() == nil:
			s.link.fail(err, false)
		}
	}
}

// intentCopy is the local copy of the intent a node last applied from
// etcd (FleetCopyFile). Its methods are safe for concurrent use.
type intentCopy struct {
	path string
	node string
	now  func() time.Time

	mu    sync.Mutex
	saved intent.Revision
	warn  bool // a failed write was logged
	log   *slog.Logger
}

// intentCopyDoc is FleetCopyFile's content.
type intentCopyDoc struct {
	// Note says what the file is, for whoever opens it.
	Note     string          `json:"note"`
	Node     string          `json:"node"`
	Revision uint64          `json:"revision"`
	Saved    time.Time       `json:"saved"`
	Intent   json.RawMessage `json:"intent"`
}

const intentCopyNote = "lbdnsd's copy of the fleet intent it last applied from etcd, served only when it starts while etcd cannot be reached; never written back to etcd"

// save writes st when it is newer than the copy; a failure is logged
// once (the copy only matters for a start without etcd).
func (c *intentCopy) save(st intent.Stored) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.Revision <= c.saved && c.saved != 0 {
		return
	}
	doc, err := intent.Marshal(st.State)
	if err == nil {
		var b []byte
		b, err = json.MarshalIndent(intentCopyDoc{Note: intentCopyNote, Node: c.node, Revision: uint64(st.Revision), Saved: c.now().UTC(), Intent: doc}, "", "  ")
		if err == nil {
			err = atomicfile.Write(c.path, append(b, '\n'))
		}
	}
	var ds *atomicfile.DirSyncError
	if err != nil && !errors.As(err, &ds) {
		if !c.warn && c.log != nil {
			c.log.Warn("cannot keep the local copy of the fleet's intent (served only at a start without etcd)", "path", c.path, "err", err)
		}
		c.warn = true
		return
	}
	c.saved, c.warn = st.Revision, false
}

// load reads the copy; found is false when there is none.
func (c *intentCopy) load() (st intent.Stored, found bool, err error) {
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return intent.Stored{}, false, nil
	}
	if err != nil {
		return intent.Stored{}, false, fmt.Errorf("%s: %w", c.path, err)
	}
	var doc intentCopyDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return intent.Stored{}, false, fmt.Errorf("%s: %w", c.path, err)
	}
	s, err := intent.Parse(doc.Intent)
	if err != nil {
		return intent.Stored{}, false, fmt.Errorf("%s: %w", c.path, err)
	}
	c.mu.Lock()
	c.saved = intent.Revision(doc.Revision)
	c.mu.Unlock()
	return intent.Stored{State: s, Revision: intent.Revision(doc.Revision)}, true, nil
}

// fleetEtcd is the node's link to etcd for status (nil without [fleet]).
func (d *Daemon) fleetEtcd() *control.FleetEtcd {
	if d.fleet == nil || d.fleet.link == nil {
		return nil
	}
	return d.fleet.link.state()
}

// fleetLossMetrics are the gauges of the node's link to etcd.
func (d *Daemon) fleetLossMetrics() []prometheus.Collector {
	reachable := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_etcd_reachable",
		Help: "1 while this node reaches the fleet's etcd, 0 while it cannot (it then serves the intent it applied last and refuses intent changes).",
	}, func() float64 {
		if e := d.fleetEtcd(); e != nil && e.Reachable {
			return 1
		}
		return 0
	})
	since := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lbdns_fleet_etcd_unreachable_seconds",
		Help: "How long this node has been unable to reach the fleet's etcd (0 while it reaches it).",
	}, func() float64 {
		if e := d.fleetEtcd(); e != nil && !e.Reachable {
			return d.now().Sub(e.Since).Seconds()
		}
		return 0
	})
	return []prometheus.Collector{reachable, since}
}
