package etcdfleet

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"lbdns/fleet"
)

// FollowOptions configure a Follower.
type FollowOptions struct {
	// Prefix is the [fleet] prefix.
	Prefix string
	// Check is how often the follower asks etcd for a linearizable read
	// (a quorum's answer) to know it is still in contact. Default 1s.
	Check time.Duration
	// Retry is the pause before a failed load or watch is made again.
	// Default 1s.
	Retry time.Duration
	// Logger receives the watch's warnings. Default: discard.
	Logger *slog.Logger
	// Now is the clock of the contact times and the heartbeats' ages.
	// Default time.Now.
	Now func() time.Time
}

// Follower keeps the fleet view (every node's heartbeat, the intent
// keys' revisions) and every prober's votes up to date from one etcd
// watch over the prefix: loaded whole at one revision, then watched from
// the next (WithRequireLeader), and loaded whole again after a failed
// watch or a compaction.
type Follower struct {
	cli  *clientv3.Client
	opts FollowOptions

	mu      sync.Mutex
	loaded  bool
	hbs     map[string]fleet.Heartbeat       // by node name
	mods    map[string]int64                 // intent key → mod revision
	votes   map[string]map[string]fleet.Vote // member → prober → vote
	contact time.Time                        // the last answer of a quorum
	changed chan struct{}                    // one pending wake-up
	done    chan struct{}
}

// FleetView is the fleet and its votes as a Follower last saw them.
type FleetView struct {
	// Loaded is false until the first whole load.
	Loaded bool
	// Nodes are the nodes of the view, compared (fleet.Compare).
	Nodes []fleet.Node
	// Votes are the live votes by member, each member's by prober name.
	Votes map[string][]fleet.Vote
	// Contact is when etcd (a quorum) last answered.
	Contact time.Time
}

// Follow starts a Follower of cli under opts.Prefix until ctx is done.
func Follow(ctx context.Context, cli *clientv3.Client, opts FollowOptions) *Follower {
	if opts.Check <= 0 {
		opts.Check = time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	f := &Follower{cli: cli, opts: opts, changed: make(chan struct{}, 1), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { f.follow(ctx) })
	wg.Go(func() { f.check(ctx) })
	go func() { wg.Wait(); close(f.done) }()
	return f
}

// Changed returns a channel that receives after the view changed (one
// pending signal: several changes may be one receive).
func (f *Follower) Changed() <-chan struct{} { return f.changed }

// Done is closed once the follower stopped.
func (f *Follower) Done() <-chan struct{} { return f.done }

// View returns the view as last seen.
func (f *Follower) View() FleetView {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.opts.Now()
	v := FleetView{Loaded: f.loaded, Contact: f.contact, Votes: make(map[string][]fleet.Vote, len(f.votes))}
	for _, hb := range f.hbs {
		k := KeysOf(f.opts.Prefix, hb.Cluster, hb.Name)
		v.Nodes = append(v.Nodes, fleet.Node{Heartbeat: hb, Age: max(now.Sub(hb.Beat), 0),
			CurrentRevision: uint64(max(f.mods[k.Fleet], f.mods[k.Scope]))})
	}
	v.Nodes = fleet.Compare(v.Nodes)
	for m, byProber := range f.votes {
		vs := slices.Collect(maps.Values(byProber))
		slices.SortFunc(vs, func(a, b fleet.Vote) int { return strings.Compare(a.Prober, b.Prober) })
		v.Votes[m] = vs
	}
	return v
}

// Contact returns when etcd (a quorum) last answered the follower.
func (f *Follower) Contact() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.contact
}

func (f *Follower) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *Follower) touch() {
	f.mu.Lock()
	f.contact = f.opts.Now()
	f.mu.Unlock()
}

// check asks etcd for a linearizable read every Check: each answer is a
// contact.
func (f *Follower) check(ctx context.Context) {
	t := time.NewTicker(f.opts.Check)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, f.opts.Check)
		_, err := retried(cctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
			return f.cli.Get(ctx, f.opts.Prefix+"nodes/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		})
		cancel()
		if err == nil {
			f.touch()
			f.signal() // the heartbeats' ages and the contact moved
		}
	}
}

func (f *Follower) follow(ctx context.Context) {
	for ctx.Err() == nil {
		rev, err := f.load(ctx)
		if err != nil {
			f.opts.Logger.Warn("cannot read the fleet view and votes from etcd; the last ones stay", "err", err)
		} else {
			f.watch(ctx, rev)
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.opts.Retry):
		}
	}
}

// load reads the heartbeats, the intent keys and the votes at one
// revision and makes them the view; it returns that revision.
func (f *Follower) load(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*f.opts.Check)
	defer cancel()
	p := f.opts.Prefix
	resp, err := retried(lctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return f.cli.Txn(ctx).Then(
			clientv3.OpGet(p+"nodes/", clientv3.WithPrefix()),
			clientv3.OpGet(p+"intent/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			clientv3.OpGet(p+"votes/", clientv3.WithPrefix()),
		).Commit()
	})
	if err != nil {
		return 0, err
	}
	hbs, mods, votes := map[string]fleet.Heartbeat{}, map[string]int64{}, map[string]map[string]fleet.Vote{}
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		if name, hb, ok := f.heartbeat(kv.Key, kv.Value); ok {
			hbs[name] = hb
		}
	}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		mods[string(kv.Key)] = kv.ModRevision
	}
	for _, kv := range resp.Responses[2].GetResponseRange().GetKvs() {
		if m, v, ok := f.vote(kv.Key, kv.Value); ok {
			if votes[m] == nil {
				votes[m] = map[string]fleet.Vote{}
			}
			votes[m][v.Prober] = v
		}
	}
	f.mu.Lock()
	f.loaded, f.hbs, f.mods, f.votes, f.contact = true, hbs, mods, votes, f.opts.Now()
	f.mu.Unlock()
	f.signal()
	return resp.Header.Revision, nil
}

// watch applies the events after rev until the watch fails or ctx is
// done.
func (f *Follower) watch(ctx context.Context, rev int64) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	p := f.opts.Prefix
	for resp := range f.cli.Watch(wctx, p, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			f.opts.Logger.Warn("the fleet view's watch fell behind a compaction; reading it whole", "from", rev+1, "compacted", resp.CompactRevision)
			return
		}
		if err := resp.Err(); err != nil {
			f.opts.Logger.Warn("the fleet view's watch failed; reading it whole", "err", err)
			return
		}
		f.mu.Lock()
		for _, ev := range resp.Events {
			f.applyLocked(ev)
		}
		f.contact = f.opts.Now()
		f.mu.Unlock()
		f.signal()
	}
}

func (f *Follower) applyLocked(ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	p := f.opts.Prefix
	del := ev.Type == mvccpb.DELETE
	switch {
	case strings.HasPrefix(key, p+"nodes/"):
		name := strings.TrimPrefix(key, p+"nodes/")
		if del {
			delete(f.hbs, name)
		} else if name, hb, ok := f.heartbeat(ev.Kv.Key, ev.Kv.Value); ok {
			f.hbs[name] = hb
		}
	case strings.HasPrefix(key, p+"intent/"):
		if del {
			delete(f.mods, key)
		} else {
			f.mods[key] = ev.Kv.ModRevision
		}
	case strings.HasPrefix(key, p+"votes/"):
		m, prober, ok := splitVoteKey(p, key)
		if !ok {
			return
		}
		if del {
			delete(f.votes[m], prober)
			if len(f.votes[m]) == 0 {
				delete(f.votes, m)
			}
		} else if m, v, ok := f.vote(ev.Kv.Key, ev.Kv.Value); ok {
			if f.votes[m] == nil {
				f.votes[m] = map[string]fleet.Vote{}
			}
			f.votes[m][v.Prober] = v
		}
	}
}

// heartbeat decodes a heartbeat key and value (false, logged, when it
// does not decode).
func (f *Follower) heartbeat(key, value []byte) (string, fleet.Heartbeat, bool) {
	var hb fleet.Heartbeat
	if err := json.Unmarshal(value, &hb); err != nil {
		f.opts.Logger.Warn("a fleet heartbeat does not decode; left out", "key", string(key), "err", err)
		return "", hb, false
	}
	hb.Name = strings.TrimPrefix(string(key), f.opts.Prefix+"nodes/") // the key names the node
	return hb.Name, hb, true
}

// vote decodes a vote key and value.
func (f *Follower) vote(key, value []byte) (string, fleet.Vote, bool) {
	m, prober, ok := splitVoteKey(f.opts.Prefix, string(key))
	if !ok {
		return "", fleet.Vote{}, false
	}
	var v fleet.Vote
	if err := json.Unmarshal(value, &v); err != nil {
		f.opts.Logger.Warn("a fleet vote does not decode; left out", "key", string(key), "err", err)
		return "", v, false
	}
	v.Prober = prober // the key names the prober
	return m, v, true
}

// splitVoteKey returns the member and the prober of a vote's key.
func splitVoteKey(prefix, key string) (member, prober string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix+"votes/")
	i := strings.LastIndexByte(rest, '/')
	if !ok || i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}
