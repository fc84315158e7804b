package etcdfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/control"
	"lbdns/intent"
	"lbdns/internal/atomicfile"
)

// What a node in a fleet does when it loses etcd (or starts without it):
// it keeps serving the intent it applied last, says so (status, page,
// metric, journal), refuses every intent change at once (the fleet's
// intent lives in etcd only, never on one host alone), and reads the
// intent whole when etcd is back, also when the revisions it missed were
// compacted away. To start without etcd it keeps a copy of the intent it
// last applied in its state directory (CopyFile).

// CopyFile is the file in daemon.state_dir where a node in a fleet
// keeps a copy of the intent it last applied from etcd, with its
// revision: what it serves when it starts while etcd cannot be reached.
// It is never written back to etcd.
const CopyFile = "fleet-intent.json"

const (
	// etcdProbeEvery is how often the node checks that etcd answers (a
	// linearizable read: a member without a leader does not count);
	// etcdProbeTimeout bounds one check.
	etcdProbeEvery   = time.Second
	etcdProbeTimeout = time.Second
	// etcdLostAfter is how many checks in a row must fail before etcd is
	// called unreachable (a write that fails for it says so at once).
	etcdLostAfter = 2
	// SaveTimeout bounds an intent change sent to etcd: the daemon's
	// loop waits for it, and an operator for the refusal.
	SaveTimeout = 2 * time.Second
)

// LinkEvents receives the changes of a Link (the daemon's journal).
type LinkEvents interface {
	// FleetEtcdLost: etcd became unreachable; rev is the intent revision
	// in force, source where it came from.
	FleetEtcdLost(cause error, rev uint64, source string)
	// FleetEtcdBack: etcd answers again after lost.
	FleetEtcdBack(lost time.Duration)
	// FleetStartedWithoutEtcd: the node started without etcd, serving the
	// intent of source at rev.
	FleetStartedWithoutEtcd(cause error, rev uint64, source string)
}

// Link is what the node knows of its link to etcd. Its methods are
// safe for concurrent use.
type Link struct {
	now     func() time.Time
	journal LinkEvents
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

// NewLink returns the link of a node whose intent revision in force rev
// returns, telling ev of its changes; it starts reachable.
func NewLink(now func() time.Time, ev LinkEvents, rev func() uint64) *Link {
	return &Link{now: now, rev: rev, reachable: true, since: now(), source: control.IntentFromEtcd, back: make(chan struct{}, 1), journal: ev}
}

// startedWithout records that the node started without etcd, serving
// the intent of source.
func (l *Link) startedWithout(cause error, rev uint64, source string) {
	l.mu.Lock()
	l.reachable, l.since, l.err, l.source = false, l.now(), cause.Error(), source
	l.mu.Unlock()
	l.journal.FleetStartedWithoutEtcd(cause, rev, source)
}

// ok records that etcd answered.
func (l *Link) ok() {
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
func (l *Link) fail(err error, certain bool) {
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
func (l *Link) fromEtcd() {
	l.mu.Lock()
	l.source = control.IntentFromEtcd
	l.mu.Unlock()
}

// State is the link as status and GET /v1/fleet show it.
func (l *Link) State() *control.FleetEtcd {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &control.FleetEtcd{Reachable: l.reachable, Since: l.since.UTC(), Error: l.err, IntentRevision: l.rev(), IntentSource: l.source}
}

// LostSince returns whether etcd is unreachable, and since when.
func (l *Link) LostSince() (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.reachable, l.since
}

// LossStore is the fleet's intent.Store as the daemon uses it: the etcd
// store, with the link's checks, the fast refusal of changes while etcd
// is lost, the local copy of the intent applied last, and the whole
// read when etcd is back.
type LossStore struct {
	inner *Store
	cli   *clientv3.Client
	// key is what the link's check reads (the fleet's intent key).
	key  string
	link *Link
	copy *intentCopy
	log  *slog.Logger
	// unreachable is Open's error when etcd could not be reached at
	// start (nil when it could).
	unreachable error
	// fromCopy is set when Load served the local copy: Watch reads etcd
	// whole as soon as it answers.
	fromCopy bool
}

var _ intent.Store = (*LossStore)(nil)

// LossStoreOptions are what a LossStore is made of.
type LossStoreOptions struct {
	// Inner is the node's etcd store; Client its client, whose reads of
	// Key (the fleet's intent key) check the link.
	Inner  *Store
	Client *clientv3.Client
	Key    string
	// Link is the node's link to etcd.
	Link *Link
	// CopyPath is the local copy's file (CopyFile in the state
	// directory), Node the node's name written in it.
	CopyPath, Node string
	// Now is the clock. Logger receives the warnings. Default: discard.
	Now    func() time.Time
	Logger *slog.Logger
	// Unreachable is Open's error when etcd could not be reached at
	// start (nil when it could).
	Unreachable error
}

// NewLossStore returns the store of o.
func NewLossStore(o LossStoreOptions) *LossStore {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &LossStore{inner: o.Inner, cli: o.Client, key: o.Key, link: o.Link, log: o.Logger,
		copy: &intentCopy{path: o.CopyPath, node: o.Node, now: o.Now, log: o.Logger}, unreachable: o.Unreachable}
}

// Load reads the intent from etcd; when etcd cannot be reached it
// serves the local copy (or no intent without one), and says so. Intent
// in etcd, or a local copy, that cannot be parsed is an error.
func (s *LossStore) Load(ctx context.Context) (intent.Stored, error) {
	err := s.unreachable
	if err == nil {
		st, lerr := s.inner.Load(ctx)
		if lerr == nil {
			s.copy.save(st)
			return st, nil
		}
		if !IsUnreachable(lerr) {
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
// st within SaveTimeout, and keeps the local copy.
func (s *LossStore) Save(ctx context.Context, st intent.State, expected intent.Revision) (intent.Revision, error) {
	if lost, since := s.link.LostSince(); lost {
		e := control.Errorf(control.Unavailable,
			"the fleet's etcd is unreachable (since %s, %s ago): the fleet's intent is kept in etcd only, so nothing was changed on this host or elsewhere; retry when etcd is back (lbctl fleet status)",
			since.UTC().Format(time.RFC3339), s.link.now().Sub(since).Round(time.Second))
		e.Unavailable = control.UnavailableEtcd
		return 0, e
	}
	ctx, cancel := context.WithTimeout(ctx, SaveTimeout)
	defer cancel()
	rev, err := s.inner.Save(ctx, st, expected)
	if err != nil {
		if IsUnreachable(err) {
			s.link.fail(err, true)
			e := control.Errorf(control.Unavailable,
				"the fleet's etcd did not confirm the change within %s (%v): whether it was applied is unknown; if it reached etcd, every host applies it from there (lbctl fleet status, lbctl events)",
				SaveTimeout, err)
			e.Unavailable = control.UnconfirmedEtcd
			return 0, e
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
func (s *LossStore) Watch(ctx context.Context) <-chan intent.Stored {
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
func (s *LossStore) follow(ctx context.Context, out chan<- intent.Stored) {
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
func (s *LossStore) check(ctx context.Context) {
	t := time.NewTicker(etcdProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, etcdProbeTimeout)
		_, err := retried(cctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
			return s.cli.Get(ctx, s.key, clientv3.WithCountOnly())
		})
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
// etcd (CopyFile). Its methods are safe for concurrent use.
type intentCopy struct {
	path string
	node string
	now  func() time.Time

	mu    sync.Mutex
	saved intent.Revision
	warn  bool // a failed write was logged
	log   *slog.Logger
}

// intentCopyDoc is CopyFile's content.
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
