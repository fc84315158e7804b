package etcdfleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"lbdns/fleet"
)

// HeartbeatOptions configure a Heartbeater.
type HeartbeatOptions struct {
	// Keys are the node's keys (KeysOf): the heartbeat is Keys.Node.
	Keys Keys
	// TTL is the lease's, whole seconds (at least 1s).
	TTL time.Duration
	// Interval is how often the heartbeat is written even when nothing
	// changed (its Beat, and so its age, moves). Default TTL/3.
	Interval time.Duration
	// Retry is the pause between attempts to get a new lease after the
	// last one was lost. Default 1s.
	Retry time.Duration
	// Logger receives the lease's losses and recoveries. Default: discard.
	Logger *slog.Logger
	// Now is the clock of the heartbeat's Beat and of Alive's confirmation. Default time.Now.
	Now func() time.Time
}

// Heartbeater keeps a node's heartbeat in etcd under a lease of its own
// (an etcd session, kept alive every third of the TTL): the key lives
// while the node does and reaches etcd, and is gone about TTL after it
// stops or is cut off. When the lease is lost it gets a new one and
// writes the heartbeat again.
type Heartbeater struct {
	cli  *clientv3.Client
	opts HeartbeatOptions

	mu   sync.Mutex
	hb   fleet.Heartbeat // the latest content to publish
	wake chan struct{}   // one pending wake-up of the loop
	// votes are this node's votes, by member, written again under
	// every new lease.
	votes map[string]fleet.Vote
	// unwritten are the votes whose last write failed: written again
	// by the next Vote on them, even unchanged.
	unwritten map[string]bool
	// lease is the lease in force (0 while none).
	lease atomic.Int64

	alive atomic.Bool
	// confirmed is when a write under the lease last succeeded (unix
	// nanoseconds, the Now of HeartbeatOptions): etcd takes a put only
	// under a live lease.
	confirmed atomic.Int64
	stop      context.CancelFunc
	done      chan struct{}
	sess      *concurrency.Session // the loop's; Close's once the loop is done
	closeSess context.CancelFunc
}

// StartHeartbeat gets a lease, writes hb under it and keeps it there
// until Close, rewriting it every Interval and on every Publish. It
// fails when etcd cannot be reached within ctx or refuses the write.
func StartHeartbeat(ctx context.Context, cli *clientv3.Client, opts HeartbeatOptions, hb fleet.Heartbeat) (*Heartbeater, error) {
	if opts.TTL < time.Second {
		opts.TTL = time.Second
	}
	if opts.Interval <= 0 {
		opts.Interval = opts.TTL / 3
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
	h := &Heartbeater{cli: cli, opts: opts, hb: hb, wake: make(chan struct{}, 1), done: make(chan struct{}), votes: map[string]fleet.Vote{}, unwritten: map[string]bool{}}
	sess, err := h.session(ctx)
	if err != nil {
		return nil, err
	}
	if err := h.write(ctx, sess, hb); err != nil {
		h.closeSession(sess)
		return nil, err
	}
	h.alive.Store(true)
	lctx, stop := context.WithCancel(context.Background())
	h.stop = stop
	go h.run(lctx, sess, hb)
	return h, nil
}

// session grants a lease and keeps it alive until closeSess.
func (h *Heartbeater) session(ctx context.Context) (*concurrency.Session, error) {
	secs := int64(h.opts.TTL / time.Second)
	lease, err := retried(ctx, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) { return h.cli.Grant(ctx, secs) })
	if err != nil {
		return nil, fmt.Errorf("fleet: heartbeat lease: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	sess, err := concurrency.NewSession(h.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(secs)), concurrency.WithContext(sctx))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("fleet: heartbeat session: %w", err)
	}
	h.mu.Lock()
	if h.closeSess != nil {
		h.closeSess()
	}
	h.closeSess = cancel
	h.mu.Unlock()
	h.lease.Store(int64(sess.Lease()))
	return sess, nil
}

// closeSession revokes the session's lease (its key goes at once) and
// stops its keep-alive.
func (h *Heartbeater) closeSession(sess *concurrency.Session) {
	sess.Close()
	h.mu.Lock()
	if h.closeSess != nil {
		h.closeSess()
		h.closeSess = nil
	}
	h.mu.Unlock()
}

// write puts hb, stamped now, under the session's lease.
func (h *Heartbeater) write(ctx context.Context, sess *concurrency.Session, hb fleet.Heartbeat) error {
	hb.Beat = h.opts.Now().UTC()
	b, err := json.Marshal(hb)
	if err != nil {
		return fmt.Errorf("fleet: heartbeat: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, max(h.opts.Interval, time.Second))
	defer cancel()
	if err := put(wctx, h.cli, h.opts.Keys.Node, string(b), sess.Lease()); err != nil {
		return fmt.Errorf("fleet: write heartbeat %s: %w", h.opts.Keys.Node, err)
	}
	h.confirmed.Store(h.opts.Now().UnixNano())
	return nil
}

// Publish makes hb the heartbeat's content; it is written at once when
// it says something new (fleet.Heartbeat.Same).
func (h *Heartbeater) Publish(hb fleet.Heartbeat) {
	h.mu.Lock()
	h.hb = hb
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Alive reports whether the node's lease is alive as far as it knows:
// false from the loss of a lease until the heartbeat is written again
// under a new one.
//
// It is also false once no heartbeat write has confirmed the lease for
// a TTL (writes go every Interval): by then the other nodes have most
// likely dropped this one from their view, even if its own client has
// not yet learnt that the lease is gone (which takes up to a TTL more).
func (h *Heartbeater) Alive() bool {
	if !h.alive.Load() {
		return false
	}
	return h.opts.Now().Sub(time.Unix(0, h.confirmed.Load())) <= h.opts.TTL
}

func (h *Heartbeater) run(ctx context.Context, sess *concurrency.Session, written fleet.Heartbeat) {
	defer close(h.done)
	defer func() { h.sess = sess }()
	tick := time.NewTicker(h.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			h.alive.Store(false)
			h.opts.Logger.Warn("the fleet heartbeat's lease is lost (etcd unreachable for longer than the lease?); getting a new one", "key", h.opts.Keys.Node)
			s, ok := h.renew(ctx)
			if !ok {
				return
			}
			sess = s
			h.alive.Store(true)
			h.opts.Logger.Info("the fleet heartbeat has a new lease", "key", h.opts.Keys.Node)
		case <-tick.C:
			hb := h.content()
			if err := h.write(ctx, sess, hb); err != nil {
				h.opts.Logger.Warn("cannot write the fleet heartbeat", "err", err)
				continue
			}
			written = hb
		case <-h.wake:
			hb := h.content()
			if hb.Same(written) {
				continue
			}
			if err := h.write(ctx, sess, hb); err != nil {
				h.opts.Logger.Warn("cannot write the fleet heartbeat", "err", err)
				continue
			}
			written = hb
		}
	}
}

// renew gets a new lease and writes the heartbeat under it, retrying
// every Retry until it works or ctx is done (false).
func (h *Heartbeater) renew(ctx context.Context) (*concurrency.Session, bool) {
	for {
		gctx, cancel := context.WithTimeout(ctx, max(h.opts.TTL, time.Second))
		sess, err := h.session(gctx)
		if err == nil {
			err = h.write(gctx, sess, h.content())
			if err == nil {
				err = h.rewriteVotes(gctx)
			}
			if err != nil {
				h.closeSession(sess)
			}
		}
		cancel()
		if err == nil {
			return sess, true
		}
		h.opts.Logger.Warn("cannot renew the fleet heartbeat; retrying", "err", err)
		select {
		case <-time.After(h.opts.Retry):
		case <-ctx.Done():
			return nil, false
		}
	}
}

func (h *Heartbeater) content() fleet.Heartbeat {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hb
}

// Close stops the heartbeat and revokes its lease: the node leaves the
// fleet view at once (a node that dies without Close leaves it when its
// lease expires).
func (h *Heartbeater) Close() {
	h.stop()
	<-h.done
	h.alive.Store(false)
	h.closeSession(h.sess)
}

// voteKey is the key of prober's vote on member.
func voteKey(prefix, member, prober string) string {
	return prefix + "votes/" + member + "/" + prober
}

// Vote publishes this node's vote on member (a GSLB member's key, such
// as "POOL/MEMBER") under its lease, when it changed: the vote lives
// while the node's lease does, and is written again under a new lease.
func (h *Heartbeater) Vote(ctx context.Context, member string, up bool) error {
	_, err := h.VoteChanged(ctx, member, up)
	return err
}

// VoteChanged is Vote, also saying whether the vote was written (new,
// or its last write failed). A vote whose write fails is written again
// by the next Vote on it.
func (h *Heartbeater) VoteChanged(ctx context.Context, member string, up bool) (bool, error) {
	hb := h.content()
	h.mu.Lock()
	v, ok := h.votes[member]
	switch {
	case ok && v.Up == up && !h.unwritten[member]:
		h.mu.Unlock()
		return false, nil
	case !ok || v.Up != up:
		v = fleet.Vote{Prober: hb.Name, Location: hb.Location, Up: up, At: h.opts.Now().UTC()}
		h.votes[member] = v
	}
	h.mu.Unlock()
	err := h.putVote(ctx, member, v)
	h.mu.Lock()
	if cur, ok := h.votes[member]; ok && cur == v { // not replaced or withdrawn meanwhile
		if err != nil {
			h.unwritten[member] = true
		} else {
			delete(h.unwritten, member)
		}
	}
	h.mu.Unlock()
	return true, err
}

func (h *Heartbeater) putVote(ctx context.Context, member string, v fleet.Vote) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("fleet: vote: %w", err)
	}
	key := voteKey(h.opts.Keys.Prefix, member, v.Prober)
	if err := put(ctx, h.cli, key, string(b), clientv3.LeaseID(h.lease.Load())); err != nil {
		return fmt.Errorf("fleet: write vote %s: %w", key, err)
	}
	return nil
}

// rewriteVotes writes every vote of this node again (under a new lease).
func (h *Heartbeater) rewriteVotes(ctx context.Context) error {
	h.mu.Lock()
	votes := maps.Clone(h.votes)
	h.mu.Unlock()
	for m, v := range votes {
		if err := h.putVote(ctx, m, v); err != nil {
			return err
		}
		h.mu.Lock()
		if h.votes[m] == v {
			delete(h.unwritten, m)
		}
		h.mu.Unlock()
	}
	return nil
}

// Unvote deletes this node's vote on member, if it has one (the member
// is no longer assigned to it), and says whether it had one. A delete
// that fails keeps the vote, for the next Unvote to delete.
func (h *Heartbeater) Unvote(ctx context.Context, member string) (bool, error) {
	h.mu.Lock()
	v, ok := h.votes[member]
	h.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := del(ctx, h.cli, voteKey(h.opts.Keys.Prefix, member, v.Prober)); err != nil {
		return false, fmt.Errorf("fleet: delete vote: %w", err)
	}
	h.mu.Lock()
	if h.votes[member] == v { // not voted again meanwhile
		delete(h.votes, member)
		delete(h.unwritten, member)
	}
	h.mu.Unlock()
	return true, nil
}

// Voted returns how many votes this node publishes.
func (h *Heartbeater) Voted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.votes)
}

// Withdraw deletes every vote of this node (a prober cut off from its
// canaries is no down vote: fleet.CutOff); Vote publishes again.
func (h *Heartbeater) Withdraw(ctx context.Context) error {
	h.mu.Lock()
	votes := h.votes
	h.votes, h.unwritten = map[string]fleet.Vote{}, map[string]bool{}
	h.mu.Unlock()
	for m, v := range votes {
		if err := del(ctx, h.cli, voteKey(h.opts.Keys.Prefix, m, v.Prober)); err != nil {
			return fmt.Errorf("fleet: withdraw votes: %w", err)
		}
	}
	return nil
}

// Votes reads every live vote under prefix, by member, each member's
// votes by prober name.
func Votes(ctx context.Context, cli *clientv3.Client, prefix string) (map[string][]fleet.Vote, error) {
	resp, err := retried(ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return cli.Get(ctx, prefix+"votes/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: read votes: %w", err)
	}
	out := map[string][]fleet.Vote{}
	for _, kv := range resp.Kvs {
		m, prober, ok := splitVoteKey(prefix, string(kv.Key))
		if !ok {
			continue // not a vote's key
		}
		var v fleet.Vote
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			return nil, fmt.Errorf("fleet: vote %s: %w", kv.Key, err)
		}
		v.Prober = prober // the key names the prober
		out[m] = append(out[m], v)
	}
	return out, nil
}

// Nodes reads the fleet view under prefix at one etcd revision: every
// node whose heartbeat's lease is alive, with the heartbeat's age at now
// and the intent revision in force for its scope, compared
// (fleet.Compare), by name.
func Nodes(ctx context.Context, cli *clientv3.Client, prefix string, now time.Time) ([]fleet.Node, error) {
	resp, err := retried(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return cli.Txn(ctx).Then(
			clientv3.OpGet(prefix+"nodes/", clientv3.WithPrefix()),
			clientv3.OpGet(prefix+"intent/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		).Commit()
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: read the fleet view: %w", err)
	}
	mods := map[string]int64{}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		mods[string(kv.Key)] = kv.ModRevision
	}
	var nodes []fleet.Node
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		var hb fleet.Heartbeat
		if err := json.Unmarshal(kv.Value, &hb); err != nil {
			return nil, fmt.Errorf("fleet: heartbeat %s: %w", kv.Key, err)
		}
		name := strings.TrimPrefix(string(kv.Key), prefix+"nodes/")
		hb.Name = name // the key names the node, whatever the value says
		k := KeysOf(prefix, hb.Cluster, name)
		nodes = append(nodes, fleet.Node{
			Heartbeat:       hb,
			Age:             max(now.Sub(hb.Beat), 0),
			CurrentRevision: uint64(max(mods[k.Fleet], mods[k.Scope])),
		})
	}
	return fleet.Compare(nodes), nil
}
