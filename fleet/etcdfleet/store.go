package etcdfleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/intent"
)

// StoreOptions configure a Store.
type StoreOptions struct {
	// Keys are the node's keys (KeysOf).
	Keys Keys
	// Resync is how often Watch reads the intent whole beside the
	// watch. Default 5m.
	Resync time.Duration
	// Retry is the pause before a watch that failed is made again.
	// Default 1s.
	Retry time.Duration
	// Timeout bounds a Load or a Save (etcd unreachable: the client
	// would retry until the caller's deadline). Default 5s.
	Timeout time.Duration
	// Logger receives the watch's warnings. Default: discard.
	Logger *slog.Logger
}

// Store is the operator intent of one node shared through etcd: the
// fleet's GSLB emergency switches, TTL raises and client actions (a
// client flooding one LB host of an anycast or ECMP fleet floods them
// all), and the resolver
// overrides of the node's cluster (or of the host alone). It implements
// intent.Store: a Save is one transaction guarded by the revision it was
// decided on, a stale one is refused with a *intent.ConflictError, and
// Watch delivers every revision saved by any node, each once and in
// order.
type Store struct {
	cli  *clientv3.Client
	opts StoreOptions

	mu sync.Mutex
	// last is the latest snapshot this store read, wrote or watched.
	last snapshot
}

var _ intent.Store = (*Store)(nil)

// NewStore returns the store of opts.Keys over cli.
func NewStore(cli *clientv3.Client, opts StoreOptions) *Store {
	if opts.Resync <= 0 {
		opts.Resync = 5 * time.Minute
	}
	if opts.Retry <= 0 {
		opts.Retry = time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Store{cli: cli, opts: opts}
}

// part is one intent key as read: its document (nil when absent) and its
// etcd mod revision (for a key deleted by a watched event, the
// revision of the deletion).
type part struct {
	doc []byte
	mod int64
	// ver is the key's etcd version (puts since it was created; 0 when
	// absent), -1 when not known.
	ver int64
}

// snapshot is both intent keys of the node at one etcd revision.
type snapshot struct {
	fleet, scope part
	// at is the etcd revision the snapshot is of (0: never read).
	at int64
}

// revision is the intent revision of the snapshot: the larger mod
// revision of its two keys.
func (s snapshot) revision() intent.Revision {
	return intent.Revision(max(s.fleet.mod, s.scope.mod))
}

// stored decodes the snapshot into the intent state in force.
func (s snapshot) stored() (intent.Stored, error) {
	fl, err := parsePart(s.fleet.doc, "fleet")
	if err != nil {
		return intent.Stored{}, err
	}
	sc, err := parsePart(s.scope.doc, "scope")
	if err != nil {
		return intent.Stored{}, err
	}
	if len(fl.Overrides) > 0 {
		return intent.Stored{}, errors.New("fleet: the fleet's intent holds resolver overrides: they belong to a cluster or a host")
	}
	if len(sc.Emergencies) > 0 || len(sc.TTLRaises) > 0 {
		return intent.Stored{}, errors.New("fleet: a cluster's or host's intent holds GSLB switches or TTL raises: they belong to the fleet")
	}
	if len(sc.Clients) > 0 {
		return intent.Stored{}, errors.New("fleet: a cluster's or host's intent holds client actions: they belong to the fleet")
	}
	st := intent.State{Overrides: sc.Overrides, Emergencies: fl.Emergencies, TTLRaises: fl.TTLRaises, Clients: fl.Clients}
	return intent.Stored{State: st, Revision: s.revision()}, nil
}

func parsePart(doc []byte, what string) (intent.State, error) {
	if doc == nil {
		return intent.State{}, nil
	}
	st, err := intent.Parse(doc)
	if err != nil {
		return intent.State{}, fmt.Errorf("fleet: the %s intent in etcd cannot be used: %w", what, err)
	}
	return st, nil
}

// split returns the documents of st's two scopes.
func split(st intent.State) (fleetDoc, scopeDoc []byte, err error) {
	fleetDoc, err = intent.Marshal(intent.State{Emergencies: st.Emergencies, TTLRaises: st.TTLRaises, Clients: st.Clients})
	if err != nil {
		return nil, nil, err
	}
	scopeDoc, err = intent.Marshal(intent.State{Overrides: st.Overrides})
	return fleetDoc, scopeDoc, err
}

// read reads both intent keys at one revision.
func (s *Store) read(ctx context.Context) (snapshot, error) {
	k := s.opts.Keys
	resp, err := retried(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return s.cli.Txn(ctx).Then(clientv3.OpGet(k.Fleet), clientv3.OpGet(k.Scope)).Commit()
	})
	if err != nil {
		return snapshot{}, fmt.Errorf("fleet: read intent: %w", err)
	}
	return snapshotOf(resp), nil
}

// snapshotOf is the snapshot of a transaction whose two responses are
// the gets of the fleet key and the scope key.
func snapshotOf(resp *clientv3.TxnResponse) snapshot {
	sn := snapshot{at: resp.Header.Revision}
	for i, r := range resp.Responses {
		kvs := r.GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		p := part{doc: kvs[0].Value, mod: kvs[0].ModRevision, ver: kvs[0].Version}
		if i == 0 {
			sn.fleet = p
		} else {
			sn.scope = p
		}
	}
	return sn
}

// remember keeps sn as the latest snapshot when it is newer.
func (s *Store) remember(sn snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn.at >= s.last.at {
		s.last = sn
	}
}

// Load reads the node's intent (the fleet's and its scope's) at one etcd
// revision. Intent that cannot be parsed is an error: the caller must
// not start as if there were none.
func (s *Store) Load(ctx context.Context) (intent.Stored, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	sn, err := s.read(ctx)
	if err != nil {
		return intent.Stored{}, err
	}
	st, err := sn.stored()
	if err != nil {
		return intent.Stored{}, err
	}
	s.remember(sn)
	return st, nil
}

// Save writes st in one transaction if neither intent key changed since
// revision expected, and returns the new revision; else it changes
// nothing and returns a *intent.ConflictError with what is stored. Only
// the keys whose document changes are written (both when the store does
// not know the state at expected).
func (s *Store) Save(ctx context.Context, st intent.State, expected intent.Revision) (intent.Revision, error) {
	fleetDoc, scopeDoc, err := split(st)
	if err != nil {
		return 0, fmt.Errorf("fleet: save intent: %w", err)
	}
	k := s.opts.Keys
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	var puts []clientv3.Op
	known := last.at != 0 && last.revision() == expected
	empty, _, err := split(intent.State{}) // an absent key holds no intent
	if err != nil {
		return 0, fmt.Errorf("fleet: save intent: %w", err)
	}
	same := func(stored, doc []byte) bool {
		if stored == nil {
			stored = empty
		}
		return bytes.Equal(stored, doc)
	}
	if !known || !same(last.fleet.doc, fleetDoc) {
		puts = append(puts, clientv3.OpPut(k.Fleet, string(fleetDoc)))
	}
	if !known || !same(last.scope.doc, scopeDoc) {
		puts = append(puts, clientv3.OpPut(k.Scope, string(scopeDoc)))
	}
	if len(puts) == 0 { // the same state again still makes a revision
		puts = append(puts, clientv3.OpPut(k.Scope, string(scopeDoc)))
	}
	guard := int64(expected) + 1
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	// An attempt that failed may still have been applied (a timeout
	// after the leader took it): a later attempt's guard then fails on
	// this very write, which applied tells from another writer's.
	failed := 0
	resp, err := retried(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		r, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k.Fleet), "<", guard), clientv3.Compare(clientv3.ModRevision(k.Scope), "<", guard)).
			Then(puts...).
			Else(clientv3.OpGet(k.Fleet), clientv3.OpGet(k.Scope)).
			Commit()
		if err != nil {
			failed++
		}
		return r, err
	})
	if err != nil {
		return 0, fmt.Errorf("fleet: etcd did not take the change (the fleet's intent is kept in etcd only): %w", attemptsError(err, failed))
	}
	docs := map[string][]byte{k.Fleet: fleetDoc, k.Scope: scopeDoc}
	if !resp.Succeeded {
		sn := snapshotOf(resp)
		s.remember(sn)
		if failed > 0 {
			if rev, ok := applied(sn, last, known, puts, docs, k, expected); ok {
				return intent.Revision(rev), nil
			}
		}
		cur, perr := sn.stored()
		if perr != nil {
			return 0, fmt.Errorf("fleet: save intent: %w", perr)
		}
		return 0, &intent.ConflictError{Expected: expected, Actual: cur.Revision, Current: cur.State}
	}
	rev := resp.Header.Revision
	if known {
		sn := last
		sn.at = rev
		for _, op := range puts {
			key := string(op.KeyBytes())
			p := &sn.scope
			if key == k.Fleet {
				p = &sn.fleet
			}
			ver := int64(-1)
			if p.ver >= 0 {
				ver = p.ver + 1
			}
			*p = part{doc: docs[key], mod: rev, ver: ver}
		}
		s.remember(sn)
	} else {
		s.remember(snapshot{fleet: part{fleetDoc, rev, -1}, scope: part{scopeDoc, rev, -1}, at: rev})
	}
	return intent.Revision(rev), nil
}

// applied reports whether the intent keys as read in sn (after a guard
// failed) are exactly what one earlier attempt of this save put, and
// returns that write's revision: every key written holds its document,
// all at one mod revision after expected, each written once since the
// snapshot the save was decided on (its version moved by one, when
// known), and the keys not written unchanged. Anything else is another
// writer's.
func applied(sn, last snapshot, known bool, puts []clientv3.Op, docs map[string][]byte, k Keys, expected intent.Revision) (int64, bool) {
	parts := map[string]part{k.Fleet: sn.fleet, k.Scope: sn.scope}
	before := map[string]part{k.Fleet: last.fleet, k.Scope: last.scope}
	written := map[string]bool{}
	var rev int64
	for _, op := range puts {
		key := string(op.KeyBytes())
		written[key] = true
		p := parts[key]
		if !bytes.Equal(p.doc, docs[key]) || p.mod <= int64(expected) || rev != 0 && p.mod != rev {
			return 0, false
		}
		rev = p.mod
		if b := before[key]; known && b.ver >= 0 && p.ver != b.ver+1 {
			return 0, false
		}
	}
	for key, p := range parts {
		if written[key] {
			continue
		}
		if p.mod > int64(expected) || known && p.mod != before[key].mod {
			return 0, false
		}
	}
	return rev, rev != 0
}

// Watch delivers, in order and each once, every revision of the node's
// intent saved after the store's last Load (or, without one, after the
// call), by any node; the channel is closed when ctx is done. The watch
// requires a leader (a member cut off from the others does not hold it
// silently). After a compaction of the revisions it was about to see, it
// reads the intent whole and delivers that revision (the ones between
// are gone: the latest is delivered, never an older one). Every Resync
// it reads the intent whole and asks the watch for its position; when by
// the next Resync the watch has passed that revision without seeing a
// change the read showed, or has said nothing at all, the intent read
// whole is delivered and the watch made again. A revision that cannot
// be parsed is logged and skipped.
func (s *Store) Watch(ctx context.Context) <-chan intent.Stored {
	ch := make(chan intent.Stored)
	s.mu.Lock()
	start := s.last
	s.mu.Unlock()
	go s.watch(ctx, ch, start)
	return ch
}

// watcher is one Watch's state (its goroutine only).
type watcher struct {
	s  *Store
	ch chan<- intent.Stored
	// cur is the intent keys as the watch last saw them; delivered the
	// last intent revision delivered (or known to the caller).
	cur       snapshot
	delivered intent.Revision
}

func (s *Store) watch(ctx context.Context, ch chan<- intent.Stored, start snapshot) {
	defer close(ch)
	w := &watcher{s: s, ch: ch, cur: start, delivered: start.revision()}
	if w.cur.at == 0 { // no Load before: start from what is stored now
		if !w.reload(ctx, false) {
			return
		}
		w.delivered = w.cur.revision()
	}
	resync := time.NewTicker(s.opts.Resync)
	defer resync.Stop()
	for ctx.Err() == nil {
		if !w.run(ctx, resync.C) {
			return
		}
		select { // pause before the watch is made again
		case <-time.After(s.opts.Retry):
		case <-ctx.Done():
			return
		}
	}
}

// reload reads the intent whole, retrying every Retry until it works or
// ctx is done, and delivers it when deliver is set. It returns false
// when ctx is done.
func (w *watcher) reload(ctx context.Context, deliver bool) bool {
	for {
		sn, err := w.s.read(ctx)
		if err == nil {
			w.cur = sn
			w.s.remember(sn)
			return !deliver || w.deliver(ctx)
		}
		if ctx.Err() != nil {
			return false
		}
		w.s.opts.Logger.Warn("cannot read the fleet's intent from etcd; retrying", "err", err)
		select {
		case <-time.After(w.s.opts.Retry):
		case <-ctx.Done():
			return false
		}
	}
}

// deliver hands the current snapshot on when its revision is new. It
// returns false when ctx is done.
func (w *watcher) deliver(ctx context.Context) bool {
	rev := w.cur.revision()
	if rev <= w.delivered {
		return true
	}
	st, err := w.cur.stored()
	if err != nil {
		w.s.opts.Logger.Error("the fleet's intent in etcd cannot be used; the intent in force stays", "revision", rev, "err", err)
		w.delivered = rev
		return true
	}
	select {
	case w.ch <- st:
		w.delivered = rev
		return true
	case <-ctx.Done():
		return false
	}
}

// run watches from the revision after w.cur until the watch fails (it
// returns true: make it again) or ctx is done (false).
func (w *watcher) run(ctx context.Context, resync <-chan time.Time) bool {
	k := w.s.opts.Keys
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := w.s.cli.Watch(wctx, k.Prefix+"intent/", clientv3.WithPrefix(), clientv3.WithRev(w.cur.at+1), clientv3.WithProgressNotify())
	// pending is the intent read whole at the last resync tick; heard
	// whether the watch said anything since.
	var pending snapshot
	heard := false
	for {
		select {
		case <-ctx.Done():
			return false
		case <-resync:
			if pending.at != 0 {
				missed := pending.fleet.mod > w.cur.fleet.mod || pending.scope.mod > w.cur.scope.mod
				stuck := !heard && w.cur.at < pending.at
				if missed && w.cur.at >= pending.at || stuck {
					w.s.opts.Logger.Warn("the fleet's intent watch missed a change or stopped moving; reading the intent whole", "watched", w.cur.at, "read", pending.at)
					return w.reload(ctx, true)
				}
			}
			heard = false
			sn, err := w.s.read(ctx)
			if err != nil {
				w.s.opts.Logger.Warn("cannot resync the fleet's intent from etcd; the intent in force stays", "err", err)
				pending = snapshot{}
				continue
			}
			pending = sn
			// A watch with no events to send answers with its
			// position, so that the next tick can tell it moved.
			if err := w.s.cli.RequestProgress(wctx); err != nil {
				w.s.opts.Logger.Warn("cannot ask the fleet's intent watch for progress", "err", err)
			}
		case resp, ok := <-wch:
			if !ok {
				return ctx.Err() == nil
			}
			heard = true
			if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				w.s.opts.Logger.Warn("the fleet's intent watch fell behind a compaction; reading it whole", "from", w.cur.at+1, "compacted", resp.CompactRevision)
				return w.reload(ctx, true)
			}
			if err := resp.Err(); err != nil {
				w.s.opts.Logger.Warn("the fleet's intent watch failed; making it again", "err", err)
				return true
			}
			if resp.IsProgressNotify() {
				w.cur.at = max(w.cur.at, resp.Header.Revision)
				continue
			}
			if !w.apply(ctx, resp.Events) {
				return false
			}
		}
	}
}

// apply applies the events of one watch response, one revision at a
// time, delivering each revision that changed the node's keys.
func (w *watcher) apply(ctx context.Context, events []*clientv3.Event) bool {
	k := w.s.opts.Keys
	for i := 0; i < len(events); {
		rev := events[i].Kv.ModRevision
		j := i
		for ; j < len(events) && events[j].Kv.ModRevision == rev; j++ {
			ev := events[j]
			var p *part
			switch string(ev.Kv.Key) {
			case k.Fleet:
				p = &w.cur.fleet
			case k.Scope:
				p = &w.cur.scope
			default:
				continue // another cluster's or host's intent
			}
			if rev <= p.mod {
				continue // already in a snapshot read whole
			}
			if ev.Type == mvccpb.DELETE {
				*p = part{mod: rev}
			} else {
				*p = part{doc: ev.Kv.Value, mod: rev, ver: ev.Kv.Version}
			}
		}
		i = j
		if rev > w.cur.at {
			w.cur.at = rev
		}
		w.s.remember(w.cur)
		if !w.deliver(ctx) {
			return false
		}
	}
	return true
}
